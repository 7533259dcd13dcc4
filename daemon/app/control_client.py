"""The CLI's side of the control socket."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

from daemon.core.control_protocol import MAX_LINE_BYTES, ControlReply, ControlRequest
from daemon.core.errors import ControlError, DaemonNotRunningError


def call_daemon(socket_path: Path, command: str, timeout_s: float = 10.0, **args: Any) -> Any:
    """Send one command to the running daemon and return its result.

    Raises:
        DaemonNotRunningError: nothing listens on ``socket_path``.
        ControlError: the daemon refused the command or the conversation failed.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            message = (
                f"no governor is running: nothing listens on {socket_path} "
                "(start it with 'systemctl start vllm-governor' or 'vllm-governor run')"
            )
            raise DaemonNotRunningError(message) from exc
        except PermissionError as exc:
            message = f"permission denied on {socket_path}: run as the governor's user or root"
            raise ControlError(message) from exc
        try:
            sock.sendall(ControlRequest(command, args).encode())
            reply = ControlReply.decode(_read_line(sock))
        except OSError as exc:
            message = f"talking to the governor on {socket_path} failed: {exc}"
            raise ControlError(message) from exc
    if not reply.ok:
        message = f"the governor refused {command!r}: {reply.error}"
        raise ControlError(message)
    return reply.result


def call_daemon_paged(socket_path: Path, command: str, rows: str, **args: Any) -> dict[str, Any]:
    """A paged command's whole answer: every page's ``rows`` in order, with the last page's rest.

    The daemon answers a long list a page at a time (see
    :func:`daemon.core.control_protocol.page_of`), each page from the snapshot its first page
    took (:mod:`daemon.engine.runtime.paged_replies`), so the pages add up to one moment's list.

    Raises:
        DaemonNotRunningError: nothing listens on ``socket_path``.
        ControlError: the daemon refused the command or the conversation failed.
    """
    gathered: list[Any] = []
    offset: int | None = 0
    snapshot: str | None = None
    answer: dict[str, Any] = {}
    while offset is not None:
        answer = call_daemon(socket_path, command, offset=offset, snapshot=snapshot, **args)
        gathered.extend(answer[rows])
        offset, snapshot = answer.get("next_offset"), answer.get("snapshot")
    answer[rows] = gathered
    answer.pop("next_offset", None)
    answer.pop("snapshot", None)
    return answer


def answer_or_say_why(socket_path: Path, command: str, **args: Any) -> Any:
    """:func:`call_daemon` for a CLI command: on failure, say why on stderr and answer None.

    The commands that show what the daemon answers exit non-zero on None; the reason (no
    daemon, permission denied, a refusal) is already on the user's terminal.
    """
    try:
        return call_daemon(socket_path, command, **args)
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return None


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_LINE_BYTES:
            message = "the governor's reply is larger than the protocol allows"
            raise ControlError(message)
    return b"".join(chunks)
