"""The ``sd_notify`` protocol, spoken directly: datagrams to ``$NOTIFY_SOCKET``.

Written by hand because the protocol is a few lines (``man 3 sd_notify``) and the maintained
bindings need libsystemd's headers to build. An address starting with ``@`` is an abstract
socket. ``WATCHDOG_USEC`` arms the watchdog; when ``WATCHDOG_PID`` is set, it must name us.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


class SystemdNotifier:
    """Sends lifecycle messages to systemd; every method is a no-op outside systemd."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self._address = _socket_address(environ.get("NOTIFY_SOCKET", ""))
        self._watchdog_s = _watchdog_seconds(environ)
        self._socket: socket.socket | None = None
        if self._address is not None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # Sent from the event loop: a receiver that stops reading (its queue holds ten
            # datagrams) must cost a dropped message, never a loop blocked for good.
            self._socket.setblocking(False)

    def ready(self, status: str) -> None:
        """Send ``READY=1`` with a status line."""
        self._send(f"READY=1\nSTATUS={status}")

    def reloading(self) -> None:
        """Send ``RELOADING=1`` with the monotonic timestamp systemd asks for."""
        now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self._send(f"RELOADING=1\nMONOTONIC_USEC={now_us}")

    def stopping(self) -> None:
        """Send ``STOPPING=1``."""
        self._send("STOPPING=1")

    def status(self, text: str) -> None:
        """Send ``STATUS=`` (one line; newlines would start a new assignment)."""
        self._send("STATUS=" + text.replace("\n", " "))

    def watchdog(self) -> None:
        """Send ``WATCHDOG=1``."""
        self._send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """Half of ``WATCHDOG_USEC``, as systemd recommends, or None when not armed."""
        return None if self._watchdog_s is None else self._watchdog_s / 2

    def close(self) -> None:
        """Close the datagram socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _send(self, message: str) -> None:
        if self._socket is None or self._address is None:
            return
        try:
            self._socket.sendto(message.encode(), self._address)
        except BlockingIOError:
            # The service manager is not reading: drop it. A dropped WATCHDOG=1 is what the
            # watchdog is for; a lost STATUS= is replaced by the next one.
            log.warning("the service manager's queue is full; message dropped")
        except OSError as exc:
            # systemd gone or socket unreachable: the daemon keeps working, and says so once.
            log.warning("cannot notify the service manager", extra={"error": str(exc)})


def _socket_address(value: str) -> str | None:
    if not value:
        return None
    if value.startswith("@"):
        return "\0" + value[1:]
    return value


def _watchdog_seconds(environ: Mapping[str, str]) -> float | None:
    usec = environ.get("WATCHDOG_USEC", "")
    pid = environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return int(usec) / 1_000_000
