"""One instance's gate as the actuators see it: HAProxy's runtime API on one server.

The engine builds it from ``[vllm.gate]`` and lends it to the gate's actuator (the cap) and to
the vLLM actuator (the drain around a restart), which may not import the sources, so both send
their commands through the same checked client the HAProxy source polls with.
"""

from __future__ import annotations

from daemon.core.gate_settings import GateSettings
from daemon.core.settings import VllmInstance
from daemon.sources.haproxy_runtime import HaproxyRuntime, ServerRef, parse_stats_address


class HaproxyGate:
    """One HAProxy server: its cap (``maxconn``) and its administrative state."""

    def __init__(self, settings: GateSettings) -> None:
        self._runtime = HaproxyRuntime(
            parse_stats_address(settings.stats_socket), settings.timeout_s
        )
        self._ref = ServerRef(settings.backend, settings.server)

    @property
    def where(self) -> str:
        """The socket and the server (``/run/haproxy/vllm-governor.sock vllm/main``)."""
        return f"{self._runtime} {self._ref}"

    async def read_cap(self) -> int | None:
        """The server's ``maxconn`` now; None when it has none."""
        return await self._runtime.server_maxconn(self._ref)

    async def write_cap(self, cap: int) -> int | None:
        """Set the server's ``maxconn`` live and read it back."""
        return await self._runtime.set_server_maxconn(self._ref, cap)

    async def status(self) -> str:
        """The server's ``status`` in ``show stat``."""
        return (await self._runtime.server_row(self._ref)).text("status")

    async def hold(self) -> str:
        """``set server ... state drain``: no new request reaches the server."""
        return await self._runtime.set_server_state(self._ref, "drain")

    async def in_flight(self) -> int | None:
        """The server's current sessions (``scur``)."""
        sessions = (await self._runtime.server_row(self._ref)).number("scur")
        return None if sessions is None else int(sessions)

    async def admit(self) -> str:
        """``set server ... state ready``: requests reach the server again."""
        return await self._runtime.set_server_state(self._ref, "ready")


def gate_of(instance: VllmInstance) -> HaproxyGate | None:
    """The gate configured in front of ``instance``, or None."""
    return HaproxyGate(instance.gate) if instance.gate.enabled else None
