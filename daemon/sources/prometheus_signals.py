"""The signals of the Prometheus source: one per configured query, named by its key.

Declared apart from the source itself so that naming them costs no HTTP client. A query
configured as a plain string is a scalar: one series, or no data when it gives several. A
query configured as a table with a ``key`` is a map keyed by that label of its series
(``queue_by_model["llama"]`` for ``sum by (model) (...)``, ``key = "model"``).
"""

from __future__ import annotations

from daemon.core.settings import PrometheusSourceSection
from daemon.sources.declarations import SignalDeclaration, unit_of

SOURCE = "prometheus"


def declarations(section: PrometheusSourceSection) -> tuple[SignalDeclaration, ...]:
    """One declaration per query of ``section``."""
    return tuple(
        SignalDeclaration(
            name,
            SOURCE,
            query.help or f"PromQL: {query.query}",
            query.unit or unit_of(name),
            key=query.key or None,
        )
        for name, query in section.query_specs().items()
    )
