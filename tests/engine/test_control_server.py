from __future__ import annotations

import asyncio
import json
import os
import pwd
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from daemon.core.control_protocol import ControlRequest
from daemon.core.errors import ControlError
from daemon.engine.runtime.control_server import Caller, serve_control_socket
from daemon.engine.runtime.supervisor import Readiness


async def _echo(request: ControlRequest, caller: Caller) -> dict[str, Any]:
    return {"args": request.args, "uid": caller.uid, "user": caller.user}


async def _refuse(_request: ControlRequest, _caller: Caller) -> None:
    raise ControlError("not now")


async def _crash(_request: ControlRequest, _caller: Caller) -> None:
    raise RuntimeError("a bug")


@pytest_asyncio.fixture
async def server(short_tmp: Path) -> AsyncIterator[Path]:
    path = short_tmp / "run" / "control.sock"
    readiness = Readiness()
    task = asyncio.create_task(
        serve_control_socket(path, {"echo": _echo, "refuse": _refuse, "crash": _crash}, readiness)
    )
    await asyncio.wait_for(readiness.wait(), 5)
    yield path
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not path.exists()


async def _ask(path: Path, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(payload)
    await writer.drain()
    line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return line


@pytest.mark.asyncio
async def test_commands_get_the_callers_identity(server: Path) -> None:
    reply = json.loads(await _ask(server, ControlRequest("echo", {"x": 1}).encode()))
    me = pwd.getpwuid(os.getuid()).pw_name
    assert reply == {"ok": True, "result": {"args": {"x": 1}, "uid": os.getuid(), "user": me}}
    assert (server.parent.stat().st_mode & 0o777) == 0o700


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b'{"command": "nope"}\n', "unknown command 'nope' (known: crash, echo, refuse)"),
        (b"garbage\n", "not a JSON line"),
        (b'{"command": "refuse"}\n', "not now"),
    ],
)
async def test_bad_requests_get_an_error_reply(server: Path, payload: bytes, error: str) -> None:
    reply = await _ask(server, payload)
    assert reply.startswith(b'{"ok": false, "error": "')
    assert error.encode() in reply


@pytest.mark.asyncio
async def test_an_oversized_line_is_refused_and_the_next_one_served(server: Path) -> None:
    reader, writer = await asyncio.open_unix_connection(server)
    writer.write(b"x" * (2 << 20) + b"\n" + ControlRequest("echo").encode())
    await writer.drain()
    refused, served = await reader.readline(), await reader.readline()
    writer.close()
    await writer.wait_closed()
    assert json.loads(refused) == {
        "ok": False,
        "error": "a request is at most 65536 bytes on one line; this one was skipped",
    }
    assert json.loads(served)["ok"] is True


@pytest.mark.asyncio
async def test_a_handler_that_fails_unexpectedly_still_answers(server: Path) -> None:
    reply = json.loads(await _ask(server, ControlRequest("crash").encode()))
    assert reply == {
        "ok": False,
        "error": "the command failed inside the governor (see its log)",
    }
    assert b'"ok": true' in await _ask(server, ControlRequest("echo").encode())


def _connect_as_nobody(path: Path) -> str:
    """Fork, become ``nobody``, try the socket; return what happened."""
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        outcome = b"?"
        try:
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(5)
                sock.connect(str(path))
                # A refused peer is told at once, before it sends anything.
                outcome = sock.recv(200)
        except PermissionError:
            outcome = b"denied by file mode"
        finally:
            os.write(write_end, outcome)
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


@pytest.mark.asyncio
async def test_other_users_are_refused(server: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    loop = asyncio.get_running_loop()
    # Open the directories so that only the socket's own 0600 mode stands in the way.
    server.parent.parent.chmod(0o755)
    server.parent.chmod(0o755)
    assert await loop.run_in_executor(None, _connect_as_nobody, server) == "denied by file mode"
    # With the file mode opened up, the peer-credential check still refuses.
    server.chmod(0o666)
    reply = await loop.run_in_executor(None, _connect_as_nobody, server)
    assert reply == '{"ok": false, "error": "permission denied"}\n'
