"""The ``[batch]`` section of ``config.toml``: how the governor runs offline batch jobs.

Jobs are files in the OpenAI batch input format, submitted with ``vllm-governor batch submit``;
their requests go to the target's vLLM ``url`` at most ``concurrency`` at a time. A request
that fails in a way worth retrying (429, 5xx, a connection refused while vLLM restarts) is sent
again with backoff from ``retry_base_s`` up to ``retry_cap_s``, for up to ``retry_window_s``
after its first failure. The default file limits are OpenAI's (200 MB, 50,000 requests).

With ``inbox_target`` set, a file dropped into ``inbox_dir`` (``*.jsonl``, once its size has
stayed the same for one ``inbox_poll_s``) is submitted as a job for that target; one that is
refused gets a ``NAME.rejected.txt`` beside it saying why, file:line.

Where the target runs ``--scheduling-policy priority`` (:mod:`daemon.batch.scheduling`), every
batch request carries ``priority`` (vLLM runs lower values first; online requests default to
0), so that online requests waiting overtake batch ones. Under ``fcfs`` nothing can overtake:
a lane a policy opens then takes only the slots online requests leave free (one spare), at most
``fcfs_share`` of ``max-num-seqs``, and is closed while an online request waits in vLLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class BatchSection(BaseModel):
    """Offline batch jobs (``[batch]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: Annotated[int, Field(ge=1, le=1024)] = 4
    request_timeout_s: _Seconds = 600.0
    retry_window_s: _Seconds = 1800.0
    retry_base_s: _Seconds = 1.0
    retry_cap_s: _Seconds = 30.0
    max_file_bytes: Annotated[int, Field(ge=1024, le=1 << 32)] = 200 * 1000 * 1000
    max_lines: Annotated[int, Field(ge=1, le=1_000_000)] = 50_000
    inbox_dir: Path = Path("/var/lib/vllm-governor/batch-inbox")
    # The [[vllm]] instance the inbox's files go to; empty: no inbox.
    inbox_target: str = ""
    inbox_poll_s: _Seconds = 5.0
    # vLLM's request priority for batch requests (lower runs first): above every online one.
    priority: Annotated[int, Field(ge=1, le=1 << 31)] = 1000
    # Under fcfs, the lane's share of max-num-seqs at most (an unknown max-num-seqs: 1 request).
    fcfs_share: Annotated[float, Field(gt=0, le=1)] = 0.25
    # Prefill a long completions prompt in pieces of this many tokens through vLLM's prefix
    # cache, so that no step carries a batch prompt whole (0: send every prompt whole). Only
    # for servers that run the prefix cache (vLLM V1's default).
    prefill_piece_tokens: Annotated[int, Field(ge=0, le=1 << 20)] = 0
    # The lane's pieces in flight at once: each adds at most one piece to a step.
    prefill_pieces_in_flight: Annotated[int, Field(ge=1, le=64)] = 1
