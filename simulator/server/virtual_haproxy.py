"""HAProxy's runtime API over a simulated gate, as the governor's gate client speaks it.

The governor moves an admission cap with ``set maxconn server B/S N``, drains the server before
a restart with ``set server B/S state drain`` (``ready`` lifts it), and reads the gate with
``show stat``. This Unix socket answers those commands, one per connection as HAProxy's
non-interactive mode does, from a :class:`~simulator.gate.Gate`: ``slim`` is its cap,
``scur`` the requests inside the engine, ``qcur`` those waiting, ``stot`` those let in,
``hrsp_5xx`` and ``econ`` the 503s of queue timeouts (on the backend, as HAProxy counts
requests no server took), ``qtime`` the mean wait in ms over the last 1024 requests let in.
Anything else gets HAProxy's "Unknown command." answer.

Two gates answer it: a virtual run's (``simulate``, :func:`run_gate` of a
:class:`~simulator.server.virtual_host.VirtualHost`) and the one in front of ``sim serve``'s
replayed load (:mod:`simulator.server.gated_load`); both are a :class:`GateKeeper`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from simulator.gate import Gate
from simulator.server.virtual_host import VirtualHost

_HEADER = (
    "pxname",
    "svname",
    "qcur",
    "qmax",
    "scur",
    "smax",
    "slim",
    "stot",
    "econ",
    "hrsp_2xx",
    "hrsp_5xx",
    "qtime",
    "status",
    "type",
)
_BACKEND, _SERVER = "1", "2"


class GateKeeper(Protocol):
    """A gate in front of an engine, and what the runtime API reads and moves of it."""

    @property
    def gate(self) -> Gate[Any]:
        """The gate."""
        ...

    @property
    def served(self) -> int:
        """Requests the gate let in that have ended (HAProxy's 2xx, for ``show stat``)."""
        ...

    @property
    def recent_waits(self) -> Sequence[float]:
        """Seconds waited at the gate by the last requests let in (up to 1024)."""
        ...

    def sync(self) -> None:
        """Bring the gate up to now before it is read or moved."""

    def set_cap(self, cap: int) -> None:
        """``set maxconn server``: the cap, live."""

    def set_draining(self, draining: bool) -> None:
        """``set server ... state``: drain (nothing new goes in) or ready."""


class _RunGate:
    """A virtual run's gate, brought up to the loop's clock through its host at each look."""

    def __init__(self, host: VirtualHost) -> None:
        if host.run.gate is None:
            message = "the run has no gate to serve as HAProxy"
            raise ValueError(message)
        self._host = host
        self._gate: Gate[Any] = host.run.gate

    @property
    def gate(self) -> Gate[Any]:
        return self._gate

    @property
    def served(self) -> int:
        return len(self._host.run.finished) - self._gate.timed_out

    @property
    def recent_waits(self) -> Sequence[float]:
        return self._host.run.recent_gate_waits

    def sync(self) -> None:
        self._host.sync()

    def set_cap(self, cap: int) -> None:
        self._host.run.set_gate_cap(cap)

    def set_draining(self, draining: bool) -> None:
        self._host.run.set_gate_draining(draining)


def run_gate(host: VirtualHost) -> GateKeeper:
    """The gate of ``host``'s virtual run (ValueError when it has none)."""
    return _RunGate(host)


class VirtualHaproxy:
    """One backend with one server, the gate in front of a simulated engine.

    Args:
        keeper: The gate.
        backend: The backend's name.
        server: The server's name.
    """

    def __init__(self, keeper: GateKeeper, backend: str, server: str) -> None:
        self._keeper = keeper
        self.backend = backend
        self.server = server
        self._qmax = 0
        self._smax = 0

    def answer(self, line: str) -> str:
        """HAProxy's answer to one command line."""
        self._keeper.sync()
        words = line.split()
        if words[:2] == ["show", "stat"] and len(words) == 5:
            return self._show_stat(words[2])
        if words[:3] == ["set", "maxconn", "server"] and len(words) == 5:
            return self._set_maxconn(words[3], words[4])
        if words[:2] == ["set", "server"] and len(words) == 5 and words[3] == "state":
            return self._set_state(words[2], words[4])
        return "Unknown command.\n"

    def _set_maxconn(self, ref: str, value: str) -> str:
        if not self._known(ref):
            return "No such server.\n"
        if not value.isdigit() or int(value) < 1:
            return "Value out of range.\n"
        self._keeper.set_cap(int(value))
        return ""

    def _set_state(self, ref: str, state: str) -> str:
        if not self._known(ref):
            return "No such server.\n"
        if state not in ("ready", "drain", "maint"):
            return "'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n"
        self._keeper.set_draining(state != "ready")
        return ""

    def _known(self, ref: str) -> bool:
        return ref == f"{self.backend}/{self.server}"

    def _show_stat(self, proxy: str) -> str:
        if proxy not in ("-1", self.backend):
            return "No such proxy.\n"
        gate = self._keeper.gate
        self._qmax = max(self._qmax, gate.queued)
        self._smax = max(self._smax, gate.in_flight)
        waits = self._keeper.recent_waits
        qtime = round(1000 * sum(waits) / len(waits)) if waits else 0
        status = "DRAIN" if gate.draining else "UP"
        refused = str(gate.timed_out)
        served = str(self._keeper.served)
        server = {
            "pxname": self.backend,
            "svname": self.server,
            "qcur": str(gate.queued),
            "qmax": str(self._qmax),
            "scur": str(gate.in_flight),
            "smax": str(self._smax),
            "slim": str(gate.cap),
            "stot": str(gate.admitted),
            "econ": "",
            "hrsp_2xx": served,
            "hrsp_5xx": "0",
            "qtime": str(qtime),
            "status": status,
            "type": _SERVER,
        }
        backend = {
            **server,
            "svname": "BACKEND",
            "qcur": "0",
            "slim": "",
            "econ": refused,
            "hrsp_5xx": refused,
            "status": "UP",
            "type": _BACKEND,
        }
        rows = [server] if proxy != "-1" else [backend, server]
        lines = ["# " + ",".join(_HEADER) + ","]
        lines.extend(",".join(row[name] for name in _HEADER) + "," for row in rows)
        return "\n".join(lines) + "\n\n"


async def serve_haproxy(haproxy: VirtualHaproxy, path: Path) -> asyncio.Server:
    """Listen on the Unix socket ``path``; the caller closes the server."""

    async def one_command(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline()).decode("ascii", errors="replace").strip()
            writer.write(haproxy.answer(line).encode())
            with contextlib.suppress(ConnectionError):  # a client that gave up waiting
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_unix_server(one_command, path)
