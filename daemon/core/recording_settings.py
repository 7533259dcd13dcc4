"""The ``[recording]`` section of ``config.toml``: what the policies see, kept for backtests.

When enabled, the evaluator appends one JSON line per tick to ``path`` (wall time, monotonic
time, and per target the signals and knob values the policies were shown), flushed line by
line. ``vllm-governor backtest --recording`` replays such a file through other policies. The
file is rotated when the next line would take it past ``max_bytes``: ``path`` becomes
``path.1`` (``path.1`` becomes ``path.2``...), and only ``keep_files`` old files are kept, so
the recording's size on disk stays under ``max_bytes * (keep_files + 1)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# A line per target per tick is well under 4 KiB; a smaller file could not hold a useful span.
MIN_BYTES = 64 * 1024


class RecordingSection(BaseModel):
    """Recording of the policies' inputs, one JSON line per evaluation (``[recording]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    path: Path = Path("/var/lib/vllm-governor/recording.jsonl")
    max_bytes: Annotated[int, Field(ge=MIN_BYTES)] = 64 * 1024 * 1024
    keep_files: Annotated[int, Field(ge=0, le=100)] = 3
