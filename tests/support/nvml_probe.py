"""Run an NvmlSource in a fresh process, as the daemon would, and print what it saw as JSON.

Usage: ``python -c "from tests.support.nvml_probe import main; main()" [LIBRARY_PATH]``.
Without a library path the binding finds ``libnvidia-ml.so.1`` the ordinary way (the dynamic
linker's search, so ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import pynvml

from daemon.sources.nvml_source import NvmlSource


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


async def _observe(library_path: str | None) -> dict[str, Any]:
    polls = []
    async with NvmlSource(1.0, 5.0, library_path) as source:
        for now in (1.0, 2.0):
            result = await source.poll(now)
            samples = [[s.key.name, dict(s.key.labels), s.value] for s in result.samples]
            polls.append({"detail": result.detail, "samples": samples})
        # The binding's own verdict on a call the library may lack, while NVML is open.
        ecc_error = None
        if result.samples:
            handle = await asyncio.to_thread(pynvml.nvmlDeviceGetHandleByIndex, 0)
            try:
                await asyncio.to_thread(
                    pynvml.nvmlDeviceGetTotalEccErrors,
                    handle,
                    pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    pynvml.NVML_VOLATILE_ECC,
                )
            except pynvml.NVMLError as exc:
                ecc_error = type(exc).__name__
    return {"polls": polls, "ecc_error": ecc_error}


def main() -> None:
    """Observe twice and print ``{"polls": [...], "ecc_error": ..., "logs": [...]}``."""
    records = _Records()
    logging.getLogger("daemon").addHandler(records)
    logging.getLogger("daemon").setLevel(logging.DEBUG)
    library_path = sys.argv[1] if len(sys.argv) > 1 else None
    report = asyncio.run(_observe(library_path))
    report["logs"] = records.lines
    json.dump(report, sys.stdout)
