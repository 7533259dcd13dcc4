"""The control socket: a local Unix socket through which the CLI talks to the daemon.

Access is restricted by file permissions (the socket is created ``0600`` inside a directory
the daemon owns) and double-checked with the peer's credentials (``SO_PEERCRED``): only the
daemon's own user and root may talk to it. Each command handler receives the caller's
identity, so that a later approval can name the local user who gave it.

Every request gets an answer, a refusal included: a line over the size limit is skipped to its
end and refused, a malformed one is refused, and a handler that fails unexpectedly is logged
and answered with an error, so that one bad request never costs the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.core.control_protocol import (
    MAX_REQUEST_BYTES,
    TOO_LONG,
    ControlReply,
    ControlRequest,
)
from daemon.core.errors import ControlError, GovernorError
from daemon.engine.runtime.supervisor import Readiness

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is on the other end of the socket, from the kernel's point of view."""

    pid: int
    uid: int
    user: str


Handler = Callable[[ControlRequest, Caller], Awaitable[Any]]


async def serve_control_socket(
    path: Path, handlers: Mapping[str, Handler], readiness: Readiness
) -> None:
    """Accept control connections on ``path`` until cancelled, then remove the socket."""
    _claim_socket_path(path)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _serve_connection(reader, writer, handlers)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    previous_umask = os.umask(0o177)  # the socket is born 0600: no window for other users
    try:
        server = await asyncio.start_unix_server(on_connection, path=path, limit=MAX_REQUEST_BYTES)
    finally:
        os.umask(previous_umask)
    try:
        log.info("control socket listening", extra={"path": str(path)})
        readiness.started()
        await server.serve_forever()
    finally:
        server.close()
        _remove_socket(path)


def _claim_socket_path(path: Path) -> None:
    """Make the socket's directory, and clear a stale socket left by a crashed daemon."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists() and not path.is_symlink():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
            log.info("removed a stale control socket", extra={"path": str(path)})
            return
    message = f"another governor is already listening on {path}"
    raise ControlError(message)


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handlers: Mapping[str, Handler]
) -> None:
    caller = _caller_of(writer)
    if caller.uid not in (0, os.getuid()):
        log.warning("control connection refused", extra={"uid": caller.uid, "pid": caller.pid})
        writer.write(ControlReply(ok=False, error="permission denied").encode())
        await writer.drain()
        return
    while (line := await _read_request(reader)) != b"":
        if line is None:
            reply = ControlReply(ok=False, error=f"{TOO_LONG}; this one was skipped")
        else:
            reply = await _dispatch(line, caller, handlers)
        writer.write(reply.encode())
        await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """The next request line (b"" at the end), or None for one over the limit, skipped whole."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        return exc.partial  # the last line, without its newline; b"" at the end
    except asyncio.LimitOverrunError:
        await _skip_line(reader)
        return None


async def _skip_line(reader: asyncio.StreamReader) -> None:
    """Discard up to the next newline, a buffer at a time, so that the next line reads whole."""
    with contextlib.suppress(asyncio.IncompleteReadError):  # the end came first
        while True:
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as exc:
                await reader.readexactly(exc.consumed)


async def _dispatch(line: bytes, caller: Caller, handlers: Mapping[str, Handler]) -> ControlReply:
    try:
        request = ControlRequest.decode(line)
        handler = handlers.get(request.command)
        if handler is None:
            known = ", ".join(sorted(handlers))
            return ControlReply(
                ok=False, error=f"unknown command {request.command!r} (known: {known})"
            )
        return ControlReply(ok=True, result=await handler(request, caller))
    except GovernorError as exc:
        return ControlReply(ok=False, error=str(exc))
    except Exception:
        # A handler's bug: the caller still gets an answer, and the log the traceback.
        log.exception("control command failed", extra={"user": caller.user})
        return ControlReply(ok=False, error="the command failed inside the governor (see its log)")


def _caller_of(writer: asyncio.StreamWriter) -> Caller:
    sock = writer.get_extra_info("socket")
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", credentials)
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return Caller(pid=pid, uid=uid, user=user)


def _remove_socket(path: Path) -> None:
    path.unlink(missing_ok=True)
