"""The approvals' control-socket commands: proposals, approve, reject, freeze, unfreeze.

The approver is the local user on the other end of the socket, as the kernel says
(``SO_PEERCRED``), written ``unix:LOGIN``; their local groups count as ``unix-group:NAME``. A
CLI click goes through the very same judgement as a Slack one.
"""

from __future__ import annotations

import contextlib
import grp
import math
import os
import pwd
import uuid
from collections.abc import Mapping
from typing import Any

from daemon.approvals.clicks import Action, Click
from daemon.core.control_protocol import ControlRequest
from daemon.core.errors import ControlError
from daemon.engine.approvals.approvals_plane import ApprovalsPlane
from daemon.engine.runtime.control_server import Caller, Handler


def approval_handlers(plane: ApprovalsPlane) -> Mapping[str, Handler]:
    """The handlers, by command name."""

    async def proposals(_request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        return {"proposals": plane.listing()}

    async def approve(request: ControlRequest, caller: Caller) -> dict[str, Any]:
        return _click(plane, request, caller, Action.APPROVE)

    async def reject(request: ControlRequest, caller: Caller) -> dict[str, Any]:
        return _click(plane, request, caller, Action.REJECT)

    async def freeze(request: ControlRequest, caller: Caller) -> dict[str, Any]:
        target = _text(request.args, "target")
        duration = _seconds(request.args, "duration_s")
        reason = _text(request.args, "reason")
        return plane.freeze(target, duration, reason, by=approver(caller))

    async def unfreeze(request: ControlRequest, caller: Caller) -> dict[str, Any]:
        return plane.unfreeze(_text(request.args, "target"), by=approver(caller))

    return {
        "proposals": proposals,
        "approve": approve,
        "reject": reject,
        "freeze": freeze,
        "unfreeze": unfreeze,
    }


def approver(caller: Caller) -> str:
    """The local user as the allow-lists name them."""
    return f"unix:{caller.user}"


def local_groups(caller: Caller) -> frozenset[str]:
    """The caller's local groups as the allow-lists name them (``unix-group:NAME``)."""
    try:
        entry = pwd.getpwuid(caller.uid)
        ids = os.getgrouplist(entry.pw_name, entry.pw_gid)
    except (KeyError, OSError):
        return frozenset()
    names = set()
    for gid in ids:
        try:
            names.add(f"unix-group:{grp.getgrgid(gid).gr_name}")
        except KeyError:
            continue
    return frozenset(names)


def _click(
    plane: ApprovalsPlane, request: ControlRequest, caller: Caller, action: Action
) -> dict[str, Any]:
    proposal_id = _text(request.args, "id")
    stored = plane.store.get(proposal_id)
    # The CLI shows a proposal by id and the id is bound to one change; a client may also
    # pass the hash it showed, to be refused if it differs.
    shown_hash = request.args.get("hash")
    if shown_hash is not None and not isinstance(shown_hash, str):
        message = "'hash' must be a string"
        raise ControlError(message)
    change_hash = shown_hash or (stored.record.proposal.change_hash if stored else "")
    click = Click(
        click_id=f"cli:{uuid.uuid4().hex}",
        user=approver(caller),
        groups=local_groups(caller),
        action=action,
        proposal_id=proposal_id,
        change_hash=change_hash,
        at=plane.now(),
        via="cli",
    )
    note = request.args.get("reason", "")
    return plane.judge(click, note=note if isinstance(note, str) else "").as_json()


def _seconds(args: Mapping[str, Any], key: str) -> float:
    value = args.get(key)
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an integer too large for a float
            seconds = float(value)
    if not math.isfinite(seconds):
        message = f"{key!r} must be a finite number of seconds"
        raise ControlError(message)
    return seconds


def _text(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        message = f"{key!r} must be a non-empty string"
        raise ControlError(message)
    return value
