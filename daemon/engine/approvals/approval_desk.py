"""The approvals as Slack (or any chat adapter) sees them: a narrow port, not the plane itself.

The Slack adapter mirrors proposals into messages and turns clicks and slash commands into
judgements and freezes; it needs no more of the approvals plane than this. Depending on this
protocol instead of :class:`~daemon.engine.approvals.approvals_plane.ApprovalsPlane` keeps
the import graph one way: the plane builds its Slack link, the link never imports the plane.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from daemon.approvals.clicks import Click
from daemon.approvals.records import ProposalRecord
from daemon.core.settings import GovernorConfig
from daemon.engine.storage.proposal_store import ProposalStore


@dataclass(frozen=True, slots=True)
class ClickAnswer:
    """What a click did, for the clicker (the control socket's ``approve``/``reject`` reply)."""

    id: str
    state: str
    accepted: bool
    reason: str

    def as_json(self) -> dict[str, Any]:
        """The control socket's reply."""
        return {
            "id": self.id,
            "state": self.state,
            "accepted": self.accepted,
            "reason": self.reason,
        }


class ApprovalDesk(Protocol):
    """What a chat adapter may read and ask of the approvals."""

    @property
    def store(self) -> ProposalStore:
        """The proposals, as stored."""
        ...

    @property
    def changed(self) -> asyncio.Event:
        """Set whenever a proposal changed (the messenger syncs then)."""
        ...

    def config(self) -> GovernorConfig:
        """The configuration in force."""
        ...

    def slack_channel(self) -> str:
        """The channel proposals are posted to."""
        ...

    def approvals_needed(self, record: ProposalRecord) -> int:
        """How many approvers ``record``'s proposal needs."""
        ...

    def judge(self, click: Click, note: str = "") -> ClickAnswer:
        """Decide one click on a proposal."""
        ...

    def may_freeze(self, user: str, groups: frozenset[str]) -> bool:
        """Whether ``user`` (in ``groups``) may freeze and unfreeze."""
        ...

    def freeze(self, target: str, duration_s: float, reason: str, *, by: str) -> dict[str, Any]:
        """Freeze a target (or ``*``) for ``duration_s``."""
        ...

    def unfreeze(self, target: str, *, by: str) -> dict[str, Any]:
        """Lift a freeze."""
        ...

    async def fleet_freeze(
        self, group: str | None, duration_s: float, reason: str, *, by: str
    ) -> dict[str, Any]:
        """Freeze the whole fleet (``group`` None) or one group, in etcd."""
        ...

    async def fleet_unfreeze(self, group: str | None, *, by: str) -> bool:
        """Lift the fleet's freeze (or a group's); False when there was none."""
        ...
