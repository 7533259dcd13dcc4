"""Signal windows for verification: the signal store's derived values over any window.

The signal plane derives rates and quantiles over ``signals.window_s``; a verification needs
them over its own window (``verify_window_s``) ending now: just before a change (the baseline)
and after it. Only values fit to act on (state ``ok``) count; the rest are None.
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.sources.view import OK

MEASURED = (
    "errors_per_s",
    "ttft_p95_s",
    "preemptions_per_s",
    # Behind a gate, the wait its clients saw besides (actuators/vllm/verification.py).
    "gate_queue_time_s",
)


class StoreSignalWindows:
    """The engine's :class:`~daemon.core.actuation.SignalWindows`."""

    def __init__(self, signals: SignalPlane) -> None:
        self._signals = signals

    def measure(self, target: str, window_s: float) -> Mapping[str, float | None]:
        """The measured signals of ``target`` over the last ``window_s`` seconds."""
        values: dict[str, float | None] = dict.fromkeys(MEASURED)
        for row in self._signals.rows(window_s=window_s):
            # The row for the whole server, not one per data-parallel engine.
            if row.target != target or row.name not in values or "engine" in row.labels:
                continue
            if row.state == OK and row.value is not None:
                values[row.name] = row.value
        return values
