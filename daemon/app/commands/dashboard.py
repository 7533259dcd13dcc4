"""``vllm-governor dashboard``: print the Grafana dashboard of the governor's own metrics.

The JSON is generated from the panels in :mod:`daemon.app.dashboards`; the repository keeps
a copy in ``monitoring/vllm-governor.dashboard.json``. Import it in Grafana (Dashboards, New,
Import) or provision it from a file; it asks for a Prometheus data source.
"""

from __future__ import annotations

import argparse
import sys

from daemon.app.defaults import EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``dashboard`` subcommand."""
    parser = subparsers.add_parser(
        "dashboard",
        help="print the Grafana dashboard of the governor's own metrics (JSON)",
        description="Print the Grafana dashboard of the governor's own metrics: up and ready, "
        "sources, policies and their errors, changes, quarantines, freezes, reloads, the "
        "admission gate, proposals and budgets. Save it to a file and import it in Grafana; "
        "its data source is a variable, DS_PROMETHEUS.",
    )
    parser.set_defaults(main=main)


def main(_args: argparse.Namespace) -> int:
    """Print the dashboard."""
    from daemon.app.dashboards import dashboard, render

    sys.stdout.write(render(dashboard()))
    return EXIT_OK
