"""A client of HAProxy's runtime API (the stats socket): read stats, set a server's cap and state.

``show stat``; ``set maxconn server``; ``set server ... state ready|drain|maint``.

One command per connection, as HAProxy's non-interactive mode expects: connect, send one line,
read the answer until HAProxy closes. The exchange uses the event loop's own non-blocking
sockets (a Unix socket path, or a TCP address as a ``(host, port)`` pair; never a shell), so no
thread is needed and the runner's timeout can cancel it at any point. Every command is built
from checked parts: a backend or server name is a plain HAProxy name and a value a bounded
integer, so nothing the configuration holds can smuggle a second command (``;``, a newline).

Errors, translated at this boundary:

- the socket file is absent, refuses, resets or says nothing in time: :class:`SourceUnavailable`
  (``absent``, ``refused``, ``unreachable``, ``timeout``): HAProxy is down or restarting;
- this user may not connect (file mode, owner): :class:`SourceError` (``denied``);
- HAProxy answers but refuses the command: :class:`CommandRefused` (``unknown-server`` for an
  unknown backend or server, ``denied`` below the ``admin`` level, else ``refused``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from daemon.core.errors import CommandRefused, SourceError, SourceUnavailable
from daemon.sources.haproxy_stats import StatRow, parse_show_stat

StatsAddress = Path | tuple[str, int]

MAX_ANSWER_BYTES = 8 << 20
# HAProxy names proxies and servers with letters, digits and "-_.:" only (configuration
# manual, section 2.1); anything else cannot name one and could inject a command.
_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
# HAProxy reads the value as a C int; 0 would mean "no limit", which a gate must never become.
MAX_SERVER_MAXCONN = 2**31 - 1
# The administrative states a server can be put in (``set server B/S state``): ``ready`` takes
# traffic, ``drain`` takes no new request (its sessions go on), ``maint`` is out of service.
SERVER_STATES = ("ready", "drain", "maint")
_SERVERS_ONLY = "4"  # the <type> bit mask of ``show stat``: 1 frontends, 2 backends, 4 servers
_BACKENDS_AND_SERVERS = "6"


@dataclass(frozen=True, slots=True)
class ServerRef:
    """One server of one backend, as HAProxy's configuration names them."""

    backend: str
    server: str

    def __post_init__(self) -> None:
        checked_name("backend", self.backend)
        checked_name("server", self.server)

    def __str__(self) -> str:
        return f"{self.backend}/{self.server}"


def checked_name(what: str, name: str) -> str:
    """``name`` if it can name an HAProxy proxy or server; else ValueError naming ``what``."""
    if not _NAME.fullmatch(name):
        message = f"not an HAProxy {what} name: {name!r} (letters, digits, '-_.:')"
        raise ValueError(message)
    return name


def parse_stats_address(text: str) -> StatsAddress:
    """A stats socket address as HAProxy writes it: a path (``unix@`` optional) or host:port.

    ``/run/haproxy/admin.sock``, ``unix@/run/haproxy/admin.sock``, ``127.0.0.1:9999``,
    ``ipv4@127.0.0.1:9999``, ``[::1]:9999``.
    """
    for prefix in ("unix@", "ipv4@", "ipv6@"):
        text = text.removeprefix(prefix)
    if text.startswith("/"):
        return Path(text)
    host, separator, port = text.rpartition(":")
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        message = f"a stats socket is a path or host:port, not {text!r}"
        raise ValueError(message)
    return host.removeprefix("[").removesuffix("]"), int(port)


class HaproxyRuntime:
    """Commands to one HAProxy's stats socket; each call is one connection.

    Args:
        address: The stats socket: a Unix socket path, or ``(host, port)``.
        timeout_s: Bound on one exchange, connection included.
    """

    def __init__(self, address: StatsAddress, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        if isinstance(self.address, Path):
            return str(self.address)
        host, port = self.address
        return f"{host}:{port}"

    async def show_stat(self, backend: str | None = None) -> tuple[StatRow, ...]:
        """Rows of backends and servers: of every proxy, or of ``backend`` (servers only).

        Raises:
            CommandRefused: ``backend`` does not exist (``unknown-server``).
        """
        if backend is None:
            command = f"show stat -1 {_BACKENDS_AND_SERVERS} -1"
        else:
            command = f"show stat {checked_name('backend', backend)} {_SERVERS_ONLY} -1"
        answer = await self.command(command)
        if not answer.startswith("# "):
            raise _refusal(command, answer)
        return parse_show_stat(answer)

    async def server_row(self, ref: ServerRef) -> StatRow:
        """The ``show stat`` row of one server.

        Raises:
            CommandRefused: No such backend or server (``unknown-server``).
        """
        for row in await self.show_stat(ref.backend):
            if row.name == ref.server:
                return row
        message = f"haproxy at {self} has no server {ref}"
        raise CommandRefused(message, detail="unknown-server")

    async def server_maxconn(self, ref: ServerRef) -> int | None:
        """The ``maxconn`` of one server as HAProxy holds it now; None when it has none.

        Raises:
            CommandRefused: No such backend or server (``unknown-server``).
        """
        limit = (await self.server_row(ref)).number("slim")
        return None if limit is None else int(limit)

    async def set_server_state(self, ref: ServerRef, state: str) -> str:
        """Put one server in an administrative state, then read its status back.

        ``drain`` stops new requests from reaching the server while those it serves finish;
        with no other server in the backend, HAProxy answers new ones at once with its 503.
        ``ready`` lifts it; health checks still decide whether the server is up.

        Returns:
            The server's ``status`` read back after the change (``DRAIN``, ``UP``, ``DOWN``...).

        Raises:
            ValueError: ``state`` is not one of :data:`SERVER_STATES`.
            CommandRefused: No such backend or server, or HAProxy said no.
        """
        if state not in SERVER_STATES:
            message = f"a server state is one of {', '.join(SERVER_STATES)}, not {state!r}"
            raise ValueError(message)
        command = f"set server {ref} state {state}"
        answer = await self.command(command)
        if answer.strip():
            raise _refusal(command, answer)
        return (await self.server_row(ref)).text("status")

    async def set_server_maxconn(self, ref: ServerRef, maxconn: int) -> int | None:
        """Set one server's ``maxconn`` live (no reload), then read it back.

        Requests already served keep going; a raise lets queued requests in at once, a cut
        admits no new one until enough of those in flight have finished.

        Returns:
            The value read back after the change (the caller verifies it).

        Raises:
            ValueError: ``maxconn`` is not in 1..2**31-1.
            CommandRefused: No such backend or server, or HAProxy said no.
        """
        if not 1 <= maxconn <= MAX_SERVER_MAXCONN:
            message = f"a server's maxconn must be in 1..{MAX_SERVER_MAXCONN}, not {maxconn}"
            raise ValueError(message)
        command = f"set maxconn server {ref} {maxconn}"
        answer = await self.command(command)
        # Success is an empty answer; anything else is HAProxy's reason for refusing.
        if answer.strip():
            raise _refusal(command, answer)
        return await self.server_maxconn(ref)

    async def command(self, line: str) -> str:
        """Send one command line, return HAProxy's whole answer.

        The line must come from this module's checked builders; it is sent as it is.
        """
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._exchange(line)
        except TimeoutError as exc:
            message = f"haproxy at {self} did not answer within {self.timeout_s:g} s"
            raise SourceUnavailable(message, detail="timeout") from exc
        except FileNotFoundError as exc:
            message = f"no haproxy stats socket at {self} (is haproxy running?)"
            raise SourceUnavailable(message, detail="absent") from exc
        except ConnectionRefusedError as exc:
            # A Unix socket file left behind by a stopped haproxy refuses, as a closed port.
            message = f"haproxy at {self} refused the connection (is haproxy running?)"
            raise SourceUnavailable(message, detail="refused") from exc
        except PermissionError as exc:
            message = (
                f"not allowed to connect to haproxy's stats socket {self}: give this user the "
                "socket (stats socket ... user NAME mode 600 level admin)"
            )
            raise SourceError(message, detail="denied") from exc
        except OSError as exc:
            message = f"haproxy at {self}: {type(exc).__name__}: {exc}"
            raise SourceUnavailable(message, detail="unreachable") from exc

    async def _exchange(self, line: str) -> str:
        if isinstance(self.address, Path):
            reader, writer = await asyncio.open_unix_connection(self.address)
        else:
            reader, writer = await asyncio.open_connection(*self.address)
        chunks: list[bytes] = []
        total = 0
        try:
            writer.write(line.encode("ascii") + b"\n")
            await writer.drain()
            # HAProxy closes the connection after its answer in non-interactive mode.
            while chunk := await reader.read(1 << 16):
                total += len(chunk)
                if total > MAX_ANSWER_BYTES:
                    message = f"haproxy at {self} answered more than {MAX_ANSWER_BYTES} bytes"
                    raise SourceError(message, detail="oversized")
                chunks.append(chunk)
        finally:
            writer.close()
            # The answer is complete or abandoned; how the close goes changes neither.
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        return b"".join(chunks).decode("utf-8", errors="replace")


def _refusal(command: str, answer: str) -> CommandRefused:
    reason = " ".join(answer.split()) or "(empty answer)"
    if reason.startswith("No such"):
        detail = "unknown-server"
    elif "Permission denied" in reason:
        detail = "denied"
    else:
        detail = "refused"
    return CommandRefused(f"haproxy refused {command!r}: {reason}", detail=detail)
