"""The ``[batch]`` section of ``config.toml``: how the governor runs offline batch jobs.

Jobs are files in the OpenAI batch input format, submitted with ``vllm-governor batch submit``;
their requests go to the target's vLLM ``url`` at most ``concurrency`` at a time. A request
that fails in a way worth retrying (429, 5xx, a connection refused while vLLM restarts) is sent
again with backoff from ``retry_base_s`` up to ``retry_cap_s``, for up to ``retry_window_s``
after its first failure. The default file limits are OpenAI's (200 MB, 50,000 requests).
"""

from __future__ import annotations

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
