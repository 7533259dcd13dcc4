"""One instance's gate as the actuator sees it: HAProxy's runtime API on one server.

The engine builds it from ``[vllm.gate]`` and lends it to the gate's actuator (which may not
import the sources), so the actuator sends its commands through the same checked client the
HAProxy source polls with.
"""

from __future__ import annotations

from daemon.core.gate_settings import GateSettings
from daemon.sources.haproxy_runtime import HaproxyRuntime, ServerRef, parse_stats_address


class HaproxyGate:
    """The cap of one HAProxy server: read and set through the stats socket."""

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
