"""What the governor does with an interaction from Slack, once the transport acknowledged it.

* A press of Approve or Reject becomes a :class:`~daemon.approvals.clicks.Click` (with the
  user's groups as *Slack* says, never as the payload says) and is judged by the plane; the
  clicker is answered ephemerally when the click did not change the proposal (refused, or a
  first approval waiting for a second), the message is edited by the messenger otherwise.
* Details: an ephemeral message with everything about the proposal.
* ``/governor freeze TARGET DURATION REASON…`` and ``/governor unfreeze TARGET``: freeze files,
  for anyone on an allow-list, answered ephemerally; ``/governor fleet-freeze all|GROUP DURATION
  REASON…`` and ``/governor fleet-unfreeze all|GROUP``: the fleet's freeze in etcd, the same way.

Anything else (another app's button, a malformed payload) is ignored: the transport already
acknowledged it, and nothing in it is trusted.
"""

from __future__ import annotations

import logging
from typing import Any

from daemon.approvals.blocks import details_blocks
from daemon.approvals.clicks import ButtonKind, read_press
from daemon.core.clock import Clock
from daemon.core.errors import GovernorError
from daemon.engine.approvals.approval_desk import ApprovalDesk
from daemon.engine.approvals.slack.slack_api import SlackApi, SlackCallFailed
from daemon.engine.approvals.slack.slack_groups import SlackGroups
from daemon.policy.durations import parse_duration

log = logging.getLogger(__name__)

SLASH_USAGE = (
    "usage: /governor freeze TARGET|all DURATION REASON…  or  /governor unfreeze TARGET|all"
    "  or  /governor fleet-freeze GROUP|all DURATION REASON…  or  /governor fleet-unfreeze "
    "GROUP|all"
)
FLEET_WORDS = ("fleet-freeze", "fleet-unfreeze")


class Interactions:
    """Handles the payloads the Slack transport received."""

    def __init__(
        self, api: SlackApi, plane: ApprovalDesk, groups: SlackGroups, clock: Clock
    ) -> None:
        self._api = api
        self._plane = plane
        self._groups = groups
        self._clock = clock

    async def guarded(self, kind: str, payload: dict[str, Any]) -> None:
        """Handle one interaction; a failure is logged, never raised (others go on)."""
        try:
            await self.handle(kind, payload)
        except SlackCallFailed as exc:
            log.warning("could not answer in Slack", extra={"kind": kind, "error": str(exc)})
        except Exception:
            log.exception("handling a Slack interaction failed", extra={"kind": kind})

    async def handle(self, kind: str, payload: dict[str, Any]) -> None:
        """Handle one interaction (``interactive`` or ``slash_commands``)."""
        if kind == "slash_commands":
            await self._slash(payload)
            return
        press = read_press(payload)
        if kind != "interactive" or press is None:
            log.debug("Slack interaction ignored", extra={"kind": kind})
            return
        stored = self._plane.store.get(press.proposal_id)
        if press.kind is ButtonKind.DETAILS:
            if stored is not None:
                blocks = details_blocks(stored.record.proposal)
                await self._api.ephemeral(press.channel, press.user, "Details", blocks)
            return
        groups = await self._groups.of(press.user, self._allowed_groups())
        click = press.click(groups, self._clock.wall())
        answer = self._plane.judge(click)
        changed = stored is None or answer.state != stored.record.state.value
        if not answer.accepted or not changed:
            verdict = "Noted" if answer.accepted else "Refused"
            await self._api.ephemeral(press.channel, press.user, f"{verdict}: {answer.reason}")

    async def _slash(self, payload: dict[str, Any]) -> None:
        user = str(payload.get("user_id", ""))
        channel = str(payload.get("channel_id", "")) or self._plane.slack_channel()
        words = str(payload.get("text", "")).split()
        reply = await self._slash_reply(user, words)
        if channel and user:
            await self._api.ephemeral(channel, user, reply)

    async def _slash_reply(self, user: str, words: list[str]) -> str:
        if not words or words[0] not in ("freeze", "unfreeze", *FLEET_WORDS) or len(words) < 2:
            return SLASH_USAGE
        groups = await self._groups.of(user, self._allowed_groups())
        if not self._plane.may_freeze(user, groups):
            return "Refused: you are on no approvals allow-list"
        if words[0] in FLEET_WORDS:
            return await self._fleet_reply(user, words)
        return self._local_reply(user, words)

    def _local_reply(self, user: str, words: list[str]) -> str:
        target = "*" if words[1] in ("all", "*") else words[1]
        reason = " ".join(words[3:])
        try:
            if words[0] == "unfreeze":
                answer = self._plane.unfreeze(target, by=user)
                return f"Unfrozen: {answer['target']}" if answer["lifted"] else "Nothing was frozen"
            if len(words) < 4 or not reason:
                return SLASH_USAGE
            answer = self._plane.freeze(target, parse_duration(words[2]), reason, by=user)
        except (ValueError, GovernorError) as exc:
            return f"Refused: {exc}"
        return f"Frozen: {answer['target']} until {answer['until']} ({reason})"

    async def _fleet_reply(self, user: str, words: list[str]) -> str:
        group = None if words[1] in ("all", "*") else words[1]
        scope = "the whole fleet" if group is None else f"group {group}"
        reason = " ".join(words[3:])
        try:
            if words[0] == "fleet-unfreeze":
                lifted = await self._plane.fleet_unfreeze(group, by=user)
                return f"Unfrozen: {scope}" if lifted else f"{scope} was not frozen"
            if len(words) < 4 or not reason:
                return SLASH_USAGE
            answer = await self._plane.fleet_freeze(
                group, parse_duration(words[2]), reason, by=user
            )
        except (ValueError, GovernorError) as exc:
            return f"Refused: {exc}"
        return f"Frozen: {scope} until {answer['until']} ({answer['reason']})"

    def _allowed_groups(self) -> set[str]:
        section = self._plane.config().approvals
        return {*section.change.groups, *section.restart.groups}
