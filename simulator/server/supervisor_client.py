"""The client side of ``sim supervise``'s socket: ``sim restart`` and the status request.

One request per connection: a line of text (``restart`` or ``status``), answered by one line
of JSON with ``ok`` and either the program's state or an ``error``.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


class SupervisorError(Exception):
    """The supervisor could not be reached, or refused the request."""


def ask_supervisor(socket_path: Path, request: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Send ``request`` to the supervisor on ``socket_path`` and return its answer.

    Raises:
        SupervisorError: Nothing listens there, the conversation failed, or the answer says
            the request failed (its ``error`` is the message).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(socket_path))
            sock.sendall(request.encode() + b"\n")
            reply = sock.makefile("rb").readline()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            message = f"no supervisor listens on {socket_path} (is 'sim supervise' running?)"
            raise SupervisorError(message) from exc
        except OSError as exc:
            message = f"talking to the supervisor on {socket_path} failed: {exc}"
            raise SupervisorError(message) from exc
    try:
        answer = json.loads(reply)
    except ValueError as exc:
        message = f"the supervisor on {socket_path} answered {reply[:200]!r}, not JSON"
        raise SupervisorError(message) from exc
    if not isinstance(answer, dict) or not answer.get("ok"):
        error = answer.get("error") if isinstance(answer, dict) else answer
        message = f"the supervisor refused {request!r}: {error}"
        raise SupervisorError(message)
    return answer
