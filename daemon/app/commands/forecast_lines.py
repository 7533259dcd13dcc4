"""A tuned change's counterfactual for a terminal: under a proposal, or a journaled change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def forecast_lines(raw: Mapping[str, Any] | None) -> list[str]:
    """A tuned change's prediction: effect, restart's cost, the workload it rests on.

    ``proposals`` shows it under a proposal; ``status`` under a journaled change.
    """
    if raw is None:
        return []
    from daemon.approvals.forecast import Forecast

    forecast = Forecast.from_json(raw)
    return [
        f"    predicted: {forecast.effect_text()}",
        f"    cost: {forecast.cost_text()}",
        f"    workload: {forecast.workload_text()}",
    ]
