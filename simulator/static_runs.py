"""One workload through one engine with static settings, start to finish, in virtual time.

This is ``vllm-governor sim run``: the baseline a governor must beat, and the shortest path
from a profile, a vLLM config and a workload to a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.report import build_report
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def simulate(
    profile: EngineProfile,
    settings: EngineSettings,
    arrivals: Sequence[Arrival],
    workload: str,
    *,
    horizon: float = float("inf"),
) -> dict[str, Any]:
    """Run ``arrivals`` to completion (or ``horizon``) and return the report."""
    run = VirtualRun(Engine(profile, settings), arrivals)
    run.run(horizon)
    return build_report(run, profile, settings, workload)
