"""The fleet freeze from chat: ``/governor fleet-freeze`` and ``fleet-unfreeze`` (issue 17).

The same bounds as a local freeze (a reason, at most seven days), the same allow-list (the
plane checks it first), and the same record as ``vllm-governor fleet freeze`` writes: one key in
etcd that every governor of the fleet, or of one group, honours.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from daemon.approvals.errors import ApprovalError
from daemon.approvals.reasons import checked_reason
from daemon.core.fleet_settings import plain_name
from daemon.fleet.freeze_writes import FleetFreezer

log = logging.getLogger(__name__)

MAX_FLEET_FREEZE = timedelta(days=7)


async def fleet_freeze(
    freezer: FleetFreezer | None,
    group: str | None,
    duration_s: float,
    reason: str,
    *,
    by: str,
    now: datetime,
) -> dict[str, Any]:
    """Freeze the fleet, or ``group``, for ``duration_s``.

    Raises:
        ApprovalError: no fleet here, a group that is not a plain name, a duration out of
            bounds, or no usable reason.
        FleetError: etcd could not be written.
    """
    freezer = _in_a_fleet(freezer, group)
    reason = checked_reason(reason)
    if not reason.strip():
        message = "a fleet freeze needs a reason, for the people it stops"
        raise ApprovalError(message)
    if not 0 < duration_s <= MAX_FLEET_FREEZE.total_seconds():
        message = "a fleet freeze lasts more than 0 s and at most 7 days"
        raise ApprovalError(message)
    record = await freezer.freeze(group, now + timedelta(seconds=duration_s), reason, by=by)
    log.warning("fleet freeze set", extra={**record.as_json()})
    return {"group": group, "until": record.until.isoformat(), "reason": record.reason}


async def fleet_unfreeze(freezer: FleetFreezer | None, group: str | None, *, by: str) -> bool:
    """Lift the fleet's freeze (or ``group``'s); False when there was none.

    Raises:
        ApprovalError: no fleet here, or a group that is not a plain name.
        FleetError: etcd could not be written.
    """
    lifted = await _in_a_fleet(freezer, group).unfreeze(group)
    log.warning("fleet freeze lifted", extra={"group": group, "by": by, "lifted": lifted})
    return lifted


def _in_a_fleet(freezer: FleetFreezer | None, group: str | None) -> FleetFreezer:
    if freezer is None:
        message = "this governor is in no fleet ([fleet] is not enabled)"
        raise ApprovalError(message)
    if group is not None and not plain_name(group):
        message = f"{group!r} is not a group's name"
        raise ApprovalError(message)
    return freezer
