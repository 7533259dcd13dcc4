"""A test hook: kill this process (SIGKILL, as ``kill -9`` would) at a chosen step of a batch.

``VLLM_GOVERNOR_TEST_BATCH_CRASH=STEP:N`` kills the process the N-th time it reaches STEP:

- ``sent``: a line was marked in flight and is about to be sent (others may be in flight);
- ``written``: a result is on disk in its file, and the ledger does not yet say the line is
  done (the window exactly-once has to survive);
- ``marked``: the ledger says the line is done.

Unset (always, outside tests), it does nothing. Like ``VLLM_GOVERNOR_TEST_HOLD`` of the vLLM
actuator, it exists so that a test can stop the daemon at a step it could not otherwise hit.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

CRASH_HOOK = "VLLM_GOVERNOR_TEST_BATCH_CRASH"
STEPS = ("sent", "written", "marked")


class CrashPoints:
    """Counts the steps reached, and kills the process at the one the environment names."""

    def __init__(self, wanted: str | None = None) -> None:
        if wanted is None:
            wanted = os.environ.get(CRASH_HOOK, "")
        step, _, count = wanted.partition(":")
        self._step = step if step in STEPS else ""
        self._at = int(count) if count.isdigit() else 1
        self._reached: Counter[str] = Counter()

    def reached(self, step: str) -> None:
        """Note that ``step`` was reached; die here if this is the one asked for."""
        if not self._step:
            return
        self._reached[step] += 1
        if step == self._step and self._reached[step] == self._at:
            os.kill(os.getpid(), signal.SIGKILL)
