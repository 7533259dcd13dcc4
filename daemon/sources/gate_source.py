"""The HAProxy source of one vLLM instance's admission gate, as ``[vllm.gate]`` configures it.

One source per gate, named ``haproxy-<instance>``, so each gate has its own health, its own
staleness limit and its own poll: one HAProxy down makes only its instance's gate signals
stale. The watched server is tagged with the instance, which is how the catalogue's ``gate_*``
names find it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from daemon.core.gate_settings import GateSettings
from daemon.sources.catalogue import catalogue_declarations
from daemon.sources.declarations import SignalDeclaration
from daemon.sources.haproxy_runtime import ServerRef, parse_stats_address
from daemon.sources.haproxy_source import HaproxySource
from daemon.sources.polling import PlannedSource

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

# The gate's signals, per target (its vLLM server): gate_cap, gate_queue... and the cap's
# share of max_num_seqs, computed where views are built (daemon.policy.knob_signals).
DECLARATIONS = (
    *catalogue_declarations("haproxy"),
    SignalDeclaration(
        "gate_cap_share",
        "haproxy",
        "gate_cap divided by the current max_num_seqs knob (1: as open as vLLM itself)",
        "ratio",
        per_target=True,
    ),
)


def gate_source_name(instance: str) -> str:
    """The source name of ``instance``'s gate (``haproxy-main``)."""
    return f"haproxy-{instance}"


def gate_source(instance: str, gate: GateSettings) -> HaproxySource:
    """The polling source reading ``instance``'s gate."""
    return HaproxySource(
        parse_stats_address(gate.stats_socket),
        {ServerRef(gate.backend, gate.server): instance},
        gate.interval_s,
        gate.timeout_s,
        name=gate_source_name(instance),
    )


def planned_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    """One source per enabled ``[vllm.gate]``, restarted when its section changes."""
    for instance in config.vllm:
        if instance.gate.enabled:
            gate = gate_source(instance.name, instance.gate)
            yield PlannedSource(gate, instance.gate.stale_after_s, instance.gate)
