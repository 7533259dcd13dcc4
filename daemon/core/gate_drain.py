"""The admission gate as a restart sees it: stop admitting before the server stops, admit after.

Real vLLM keeps its port and answers ``/health`` while it drains on SIGTERM, but refuses every
new request with HTTP 500 ("cannot schedule new futures after shutdown"), an error clients do
not retry. Where a gate (HAProxy) fronts the server, the vLLM actuator therefore drains the gate
first: new requests get the gate's 503 with ``Retry-After`` (or go to the other servers of the
backend), the requests inside finish, and only then does the restart send SIGTERM. Once the new
server serves, the gate admits again. The engine lends the actuator one :class:`GateDrain` per
instance that has a gate (:data:`GateLookup`); actuators see this through :mod:`daemon.api`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from daemon.core.settings import VllmInstance


class GateDrain(Protocol):
    """One instance's gate: hold new requests, count those inside, admit again; and its cap.

    The cap follows a change of ``max-num-seqs`` (``ChangeSteps.follow_gate``).
    """

    @property
    def where(self) -> str:
        """The gate, for messages and the journal (``/run/haproxy/admin.sock vllm/main``)."""
        ...

    async def status(self) -> str:
        """The server's status at the gate (HAProxy: ``UP``, ``DOWN``, ``DRAIN``, ``MAINT``...).

        Raises:
            GovernorError: The gate cannot be reached.
        """
        ...

    async def hold(self) -> str:
        """Admit no new request (HAProxy: ``state drain``); return the status read back.

        Raises:
            GovernorError: The gate cannot be reached or refused the command.
        """
        ...

    async def in_flight(self) -> int | None:
        """Requests inside the server now; None when the gate does not say.

        Raises:
            GovernorError: The gate cannot be reached.
        """
        ...

    async def read_cap(self) -> int | None:
        """The gate's admission cap for the server now (HAProxy: ``maxconn``); None: none.

        Raises:
            GovernorError: The gate cannot be reached.
        """
        ...

    async def write_cap(self, cap: int) -> int | None:
        """Set the cap and return it as read back.

        Raises:
            GovernorError: The gate cannot be reached or refused the command.
        """
        ...

    async def admit(self) -> str:
        """Admit requests again (HAProxy: ``state ready``); return the status read back.

        Raises:
            GovernorError: The gate cannot be reached or refused the command.
        """
        ...


# The gate in front of an instance, or None where it has none.
GateLookup = Callable[[VllmInstance], GateDrain | None]


def no_gates(_instance: VllmInstance) -> GateDrain | None:
    """The lookup of a governor without gates: vLLM drains on SIGTERM by itself."""
    return None
