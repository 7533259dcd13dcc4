from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.app.systemd_notify import SystemdNotifier


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    name = f"vg-notify-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        yield "@" + name, sock


def test_messages_reach_an_abstract_notify_socket(listener: tuple[str, socket.socket]) -> None:
    address, sock = listener
    notifier = SystemdNotifier({"NOTIFY_SOCKET": address})
    notifier.ready("ready: 3 tasks")
    notifier.status("two\nlines")
    notifier.stopping()
    notifier.reloading()
    notifier.close()
    assert sock.recv(4096) == b"READY=1\nSTATUS=ready: 3 tasks"
    assert sock.recv(4096) == b"STATUS=two lines"
    assert sock.recv(4096) == b"STOPPING=1"
    reloading = sock.recv(4096).decode().splitlines()
    assert reloading[0] == "RELOADING=1"
    assert reloading[1].startswith("MONOTONIC_USEC=")


def test_path_notify_socket(short_tmp: Path) -> None:
    path = short_tmp / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        notifier = SystemdNotifier({"NOTIFY_SOCKET": str(path)})
        notifier.watchdog()
        notifier.close()
        assert sock.recv(64) == b"WATCHDOG=1"


@pytest.mark.parametrize(
    ("environ", "interval"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "junk"}, None),
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
    ],
)
def test_watchdog_interval_is_half_of_watchdog_usec_when_meant_for_us(
    environ: dict[str, str], interval: float | None
) -> None:
    assert SystemdNotifier(environ).watchdog_interval() == interval


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = SystemdNotifier({})
    notifier.ready("x")
    notifier.watchdog()
    notifier.close()


def test_unreachable_socket_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": f"@vg-nobody-{uuid.uuid4().hex}"})
    notifier.ready("x")
    notifier.close()
    assert "cannot notify the service manager" in caplog.text


def test_a_service_manager_that_stops_reading_costs_messages_not_a_blocked_daemon(
    listener: tuple[str, socket.socket],
) -> None:
    address, sock = listener
    notifier = SystemdNotifier({"NOTIFY_SOCKET": address})

    def ping_many() -> None:
        for _ in range(200):
            notifier.watchdog()

    sent = threading.Thread(target=ping_many)
    sent.start()
    # A blocking send would wait for ever once the receiver's queue (ten datagrams) is full.
    sent.join(timeout=30)
    assert not sent.is_alive(), "the notifier blocked on a full queue"
    notifier.close()
    assert sock.recv(4096) == b"WATCHDOG=1"  # what fitted in the queue arrived
