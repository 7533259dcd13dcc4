"""The table of polling source kinds: each kind's signals and how it is built from its settings.

The signal registry (:mod:`daemon.sources.registry`) declares what this table holds, and the
signal plane runs the sources its entries build (:func:`planned_sources`), so adding a polling
source is its module (the source, its ``DECLARATIONS`` and its ``planned_sources`` builder),
its settings model, and one entry here. A builder may import its source lazily: NVML and
Prometheus cost memory only when configured.

MQTT is not here: it is a subscriber with a connection of its own (and a publisher on it), not
a polling source. The signal plane runs it, and the registry declares its subscriptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from daemon.core.settings import GovernorConfig
from daemon.sources import gate_source, host_source, nvml_signals, prometheus_signals, vllm_source
from daemon.sources.declarations import SignalDeclaration
from daemon.sources.polling import PlannedSource

# Signals declared under a key path of the configuration, named in a conflict's message.
DeclarationGroup = tuple[str, tuple[SignalDeclaration, ...]]


def _none_configured(_config: GovernorConfig) -> Iterable[DeclarationGroup]:
    return ()


@dataclass(frozen=True, slots=True)
class SourceKind:
    """One kind of polling source.

    Attributes:
        key_path: Where its settings live (``sources.host``), named in messages.
        declarations: The signals it always declares, enabled or not: a signal of a source
            that is off simply has no data.
        build: The sources that a configuration asks for (none when the kind is off), each
            with its staleness limit and what it was built from (a reload compares that).
        configured: The signals that a configuration declares for it (the Prometheus
            queries), enabled or not, each group under its key path.
    """

    key_path: str
    declarations: tuple[SignalDeclaration, ...]
    build: Callable[[GovernorConfig], Iterable[PlannedSource]]
    configured: Callable[[GovernorConfig], Iterable[DeclarationGroup]] = _none_configured


SOURCE_KINDS: tuple[SourceKind, ...] = (
    SourceKind("vllm", vllm_source.DECLARATIONS, vllm_source.planned_sources),
    SourceKind("vllm.gate", gate_source.DECLARATIONS, gate_source.planned_sources),
    SourceKind("sources.nvml", nvml_signals.DECLARATIONS, nvml_signals.planned_sources),
    SourceKind("sources.host", host_source.DECLARATIONS, host_source.planned_sources),
    SourceKind(
        "sources.prometheus",
        (),
        prometheus_signals.planned_sources,
        prometheus_signals.configured_groups,
    ),
)


def planned_sources(
    config: GovernorConfig, kinds: Sequence[SourceKind] = SOURCE_KINDS
) -> list[PlannedSource]:
    """Every polling source that ``config`` asks for, kind by kind in the table's order."""
    return [planned for kind in kinds for planned in kind.build(config)]
