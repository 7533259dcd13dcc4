"""The batch lane as a restart sees it: stop the governor's own batch requests before it.

A restart of vLLM (an approved change, a maintenance restart) first closes the target's batch
lane and waits until the batch requests in flight there have ended (cancelled: their lines go
back to pending and are sent again later, their results still written once), so that no batch
request holds the drain up or meets a server going away. The lane stays closed while the change
is in flight (its journal entry is open) and opens again, as the batch policies say, once the
change is verified and finished. The engine lends the actuator this hold through
:mod:`daemon.api`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

# target -> close its batch lane and wait for its requests in flight; what was done, for the
# journal ("" when there was nothing to hold).
BatchHold = Callable[[str], Awaitable[str]]


async def no_batch_hold(_target: str) -> str:
    """The hold of a governor without batch lanes: nothing to do."""
    return ""
