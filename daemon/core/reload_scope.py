"""Which settings a reload (SIGHUP) may change, and which only a restart may.

A reload is whole or refused. Most of a new configuration applies at once and together:
envelopes, modes, verification, approvals, logging, policies, and what the sources scrape
(a server's URL, its scrape interval, timeout, staleness and page bounds; NVML, host and
Prometheus settings): the signal plane restarts exactly the sources whose settings changed.
Some settings are read once, when the daemon starts: the sockets it listens on, its state
directory, the signal store's bounds, the MQTT connection, each server's gate (the admission
loop's runtime), the Slack transport, and the set of servers itself. Applying the rest of a
new configuration while one of those stays as it was would leave the governor half on each,
so a reload that changes any of them is refused as a whole, with every such setting named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from daemon.core.settings import GovernorConfig, VllmInstance

# Whole sections read once at start.
BOOT_SECTIONS = ("control", "metrics", "governor.state_dir", "signals", "sources.mqtt", "slack")
# The settings of a [[vllm]] server read once at start (the admission loop's gate runtime).
BOOT_SERVER_FIELDS = ("gate",)


def restart_only_changes(old: GovernorConfig, new: GovernorConfig) -> list[str]:
    """The boot-only settings that differ between ``old`` and ``new``, as dotted names."""
    changed = [name for name in BOOT_SECTIONS if _get(old, name) != _get(new, name)]
    return changed + list(_server_changes(old.vllm, new.vllm))


def _server_changes(old: tuple[VllmInstance, ...], new: tuple[VllmInstance, ...]) -> Iterator[str]:
    before = {server.name: server for server in old}
    after = {server.name: server for server in new}
    if added := sorted(after.keys() - before.keys()):
        yield f"vllm: server(s) added ({', '.join(added)})"
    if removed := sorted(before.keys() - after.keys()):
        yield f"vllm: server(s) removed ({', '.join(removed)})"
    for name in sorted(before.keys() & after.keys()):
        for field in BOOT_SERVER_FIELDS:
            if _boot_part(before[name], field) != _boot_part(after[name], field):
                yield f"vllm[{name}].{field}"


def _boot_part(server: VllmInstance, field: str) -> Any:
    value = getattr(server, field)
    if field == "gate":
        # The drain bound is read at each restart; the rest of the gate when polling starts.
        return value.model_dump(exclude={"drain_timeout_s"})
    return value


def _get(config: GovernorConfig, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value
