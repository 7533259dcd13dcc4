"""pytest-xdist groups: tests that must run on one worker (``scripts/test`` runs two)."""

from __future__ import annotations

import pytest

HEAVY = pytest.mark.xdist_group("heavy")
"""The real-vLLM tier and the demo from the installed wheel. Each holds session fixtures (one
real vLLM; one wheel and one demo), and each loads both cores for minutes: one worker runs them
one after the other. Beside a real vLLM starting, the demo's drain, timed in real time, ran out
and 413 requests were aborted."""
