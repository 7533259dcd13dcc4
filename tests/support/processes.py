"""Ending the real servers tests start: politely first, then for sure."""

from __future__ import annotations

import subprocess


def end_process(process: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; always reaped."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
