"""The ``[vllm.gate]`` table of ``config.toml``: the admission gate (HAProxy) in front of one vLLM.

With a gate, the governor reads the gate's queue and sessions through HAProxy's runtime API
(the stats socket) as signals of that instance (``gate_cap``, ``gate_queue``...), and an
``admission`` policy may move the cap (the server's ``maxconn``) live; a restart of the server
drains the gate first and lifts the drain once the new server serves. Without one (the
default) the instance has no gate signals and no admission policy acts on it.

Names and the address are checked here, at load time, so a typo is a config error with its
line rather than a failing poll at run time; the same rules as the runtime client's
(``daemon.sources.haproxy_runtime``), which checks them again before any command.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]

# HAProxy names proxies and servers with letters, digits and "-_.:" only; anything else could
# not name one and could carry a second command (";", a newline) to the runtime API.
_HAPROXY_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
_HOST_PORT = re.compile(r"(?:ipv4@|ipv6@)?(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class GateSettings(BaseModel):
    """The HAProxy server in front of one vLLM instance (``[vllm.gate]``).

    Attributes:
        enabled: Whether the instance has a gate the governor reads and moves.
        stats_socket: HAProxy's stats socket at ``level admin``: a Unix socket path
            (``unix@`` optional) or ``host:port``.
        backend: The backend whose server fronts the instance.
        server: That server's name; its ``maxconn`` is the admission cap.
        interval_s: Seconds between two reads of the gate.
        timeout_s: Bound on one exchange with HAProxy.
        stale_after_s: Gate samples older than this are stale: no data, so no cap change.
        drain_timeout_s: Before a restart, how long the drained gate waits for the requests
            inside the server to finish before the restart sends SIGTERM regardless.
        queue_timeout_s: HAProxy's ``timeout queue`` for the backend: how long a request
            waits at the gate before its 503. HAProxy's stats do not show it; the what-if's
            model of the gate uses it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    stats_socket: str = "/run/haproxy/vllm-governor.sock"
    backend: str = "vllm"
    server: str = "main"
    interval_s: Seconds = 1.0
    timeout_s: Seconds = 0.5
    stale_after_s: Seconds = 5.0
    drain_timeout_s: Seconds = 30.0
    # examples/haproxy/haproxy.cfg's `timeout queue 1500ms`.
    queue_timeout_s: Seconds = 1.5

    @field_validator("backend", "server")
    @classmethod
    def _haproxy_name(cls, name: str) -> str:
        if not _HAPROXY_NAME.fullmatch(name):
            message = f"not an HAProxy name: {name!r} (letters, digits and '-_.:' only)"
            raise ValueError(message)
        return name

    @field_validator("stats_socket")
    @classmethod
    def _address(cls, address: str) -> str:
        path = address.removeprefix("unix@")
        if path.startswith("/") and "\n" not in path and "\x00" not in path:
            return address
        match = _HOST_PORT.fullmatch(address)
        if match is None or not 0 < int(match.group(2)) < 65536:
            message = (
                f"a stats socket is an absolute path or host:port, not {address!r} "
                "(e.g. /run/haproxy/vllm-governor.sock)"
            )
            raise ValueError(message)
        return address

    @model_validator(mode="after")
    def _timeout_within_interval(self) -> GateSettings:
        if self.timeout_s > self.interval_s:
            message = (
                f"timeout_s ({self.timeout_s:g}) must not exceed interval_s ({self.interval_s:g})"
            )
            raise ValueError(message)
        if self.stale_after_s <= self.interval_s:
            message = (
                f"stale_after_s ({self.stale_after_s:g}) must exceed interval_s "
                f"({self.interval_s:g}): every sample would be stale before the next one"
            )
            raise ValueError(message)
        return self
