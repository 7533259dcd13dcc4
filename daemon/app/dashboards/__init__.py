"""The Grafana dashboard of the governor's own metrics: its panels, and its JSON model."""

from __future__ import annotations

from daemon.app.dashboards.grafana_model import dashboard, render

__all__ = ["dashboard", "render"]
