"""The signals of the Prometheus source: one per configured query, named by its key.

Declared apart from the source itself so that naming them costs no HTTP client: the builder,
:func:`planned_sources`, imports the source only when it is enabled. A query configured as a
plain string is a scalar: one series, or no data when it gives several. A query configured as
a table with a ``key`` is a map keyed by that label of its series (``queue_by_model["llama"]``
for ``sum by (model) (...)``, ``key = "model"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from daemon.core.settings import GovernorConfig, PrometheusSourceSection
from daemon.sources.declarations import SignalDeclaration, unit_of
from daemon.sources.polling import PlannedSource

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


def configured_groups(
    config: GovernorConfig,
) -> Iterator[tuple[str, tuple[SignalDeclaration, ...]]]:
    """Each query's declaration under its key path, enabled or not (an off source has no data)."""
    for declaration in declarations(config.sources.prometheus):
        yield f"sources.prometheus.queries.{declaration.name}", (declaration,)


def planned_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    """The Prometheus source when ``[sources.prometheus]`` is enabled, restarted when it changes."""
    prometheus = config.sources.prometheus
    if not prometheus.enabled:
        return
    # Imported only when configured: requests and urllib3 cost memory that a daemon without
    # queries should not pay.
    from daemon.sources.prometheus_source import PrometheusSource  # noqa: PLC0415

    specs = prometheus.query_specs()
    # A map's key must survive on its series, whatever keep_labels says.
    keys = [spec.key for spec in specs.values() if spec.key]
    queries = PrometheusSource(
        prometheus.url,
        {name: spec.query for name, spec in specs.items()},
        interval_s=prometheus.interval_s,
        timeout_s=prometheus.timeout_s,
        keep_labels=(*prometheus.keep_labels, *keys),
        ca_file=Path(prometheus.ca_file) if prometheus.ca_file else None,
    )
    yield PlannedSource(queries, prometheus.stale_after_s, prometheus)
