"""Hostile requests on the control socket get an error reply; the daemon keeps serving.

Issue 15, finding 8. The daemon is a subprocess and the requests are raw bytes on its socket,
as a buggy or hostile local client would send them. Before the fix, ``duration_s: Infinity``
(OverflowError) and a 200 000-deep JSON document (RecursionError) dropped the connection with
no reply, and a 900 KB reason or one with ANSI escapes was accepted and written to the freeze
file.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import RunningDaemon, running_daemon, write_config


@dataclass(frozen=True)
class Daemon:
    """One daemon for the whole module: each request below must leave it serving."""

    running: RunningDaemon
    directory: Path

    @property
    def socket(self) -> Path:
        return self.directory / "control.sock"

    @property
    def freeze_file(self) -> Path:
        return self.directory / "state" / "freeze.main"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="vg-") as name:
        directory = Path(name)
        extra = '[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:9"\n'
        with running_daemon(write_config(directory, extra=extra)) as running:
            running.wait_for("READY=1")
            yield Daemon(running, directory)


def exchange(path: Path, *lines: bytes) -> list[bytes]:
    """Send each line on one connection and read one reply line after each."""
    replies = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(15)
        sock.connect(str(path))
        pending = b""
        for line in lines:
            # Should the daemon hang up mid-request, what it said before still counts.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(line)
            while b"\n" not in pending:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                pending += chunk
            reply, _, pending = pending.partition(b"\n")
            replies.append(reply)
    return replies


def freeze(reason: str = "load test", duration: str = "60") -> bytes:
    reason_json = json.dumps(reason)
    return (
        b'{"command": "freeze", "args": {"target": "main", "duration_s": '
        + duration.encode()
        + b', "reason": '
        + reason_json.encode()
        + b"}}\n"
    )


def error_of(reply: bytes) -> str:
    assert reply, "the connection was dropped without a reply"
    answer: dict[str, Any] = json.loads(reply)
    assert answer["ok"] is False, answer
    return str(answer["error"])


def nested(depth: int) -> bytes:
    return b'{"command": "status", "args": {"x": ' + b"[" * depth + b"]" * depth + b"}}\n"


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (freeze(duration="Infinity"), "not a finite number: Infinity"),
        (freeze(duration="-Infinity"), "not a finite number: -Infinity"),
        (freeze(duration="NaN"), "not a finite number: NaN"),
        (freeze(duration="1e400"), "not a finite number: 1e400"),
        (freeze(duration="1" + "0" * 400), "'duration_s' must be a finite number of seconds"),
        (freeze(duration="1" + "0" * 5000), "not a JSON line: Exceeds the limit"),
        (nested(200_000), "a request is at most 65536 bytes"),
        (nested(5_000), "a request may nest at most 16 levels"),
        (b"x" * (2 << 20) + b"\n", "a request is at most 65536 bytes"),
        (freeze("x" * 900_000), "a request is at most 65536 bytes"),
        (freeze("x" * 5_000), "a reason is at most 500 characters (this one has 5000)"),
        (freeze("\x1b[31mred\x1b[0m alert"), "a reason is plain text"),
        (freeze("ok \u202egnp.exe"), "a reason is plain text"),
        (
            b'{"command": "reject", "args": {"id": "p1", "reason": "\\u001b[2J"}}\n',
            "a reason is plain text",
        ),
    ],
    ids=[
        "Infinity",
        "-Infinity",
        "NaN",
        "1e400",
        "400-digit integer",
        "5000-digit integer",
        "200k-deep",
        "5k-deep",
        "2 MiB line",
        "900 KB reason",
        "5000-char reason",
        "ANSI reason",
        "bidi reason",
        "ANSI reject reason",
    ],
)
def test_a_hostile_request_gets_an_error_reply_and_the_daemon_serves_on(
    daemon: Daemon, payload: bytes, error: str
) -> None:
    refusal, after = exchange(daemon.socket, payload, b'{"command": "status"}\n')
    assert error in error_of(refusal)
    assert json.loads(after)["result"]["state"] == "ready", "the same connection serves on"
    assert call_daemon(daemon.socket, "status")["state"] == "ready"
    assert not daemon.freeze_file.exists(), "nothing was frozen"
    assert daemon.running.process.poll() is None
    assert "Traceback" not in daemon.running.log_text()


def test_a_reason_is_flattened_to_one_line_and_kept(daemon: Daemon) -> None:
    [reply] = exchange(daemon.socket, freeze("disk\tfull\non  gpu-3"))
    try:
        assert json.loads(reply)["result"]["reason"] == "disk full on gpu-3"
        me = pwd.getpwuid(os.getuid()).pw_name
        text = daemon.freeze_file.read_text()
        assert text.splitlines()[1] == f"disk full on gpu-3 (by unix:{me})"
    finally:
        call_daemon(daemon.socket, "unfreeze", target="main")
