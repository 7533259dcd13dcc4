"""Who may decide a proposal: allow-lists of Slack users and user groups, per risk class.

Nobody is allowed by default: a risk class without an allow-list cannot be approved by anyone
(the CLI's local users included), so a missing setting fails closed. The two-person rule asks
for two distinct approvers on the classes it names, typically restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from daemon.approvals.proposal import RiskClass


@dataclass(frozen=True, slots=True)
class AllowList:
    """The people who may decide: by user id (``U0123``; ``unix:alice`` for the CLI) or group.

    Attributes:
        users: User ids allowed one by one.
        groups: User-group ids (``S0123``) whose members are allowed.
    """

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def admits(self, user: str, groups: frozenset[str]) -> bool:
        """Whether ``user``, a member of ``groups``, is on the list."""
        return user in self.users or not self.groups.isdisjoint(groups)


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    """The authorisation rules of the approval flow.

    Attributes:
        allow: The allow-list of each risk class; a class that is absent admits nobody.
        two_person: The classes that need two distinct approvers (the second one applies).
    """

    allow: Mapping[RiskClass, AllowList] = field(default_factory=dict)
    two_person: frozenset[RiskClass] = frozenset()

    def admits(self, risk: RiskClass, user: str, groups: frozenset[str]) -> bool:
        """Whether ``user`` (in ``groups``) may decide proposals of class ``risk``."""
        allowed = self.allow.get(risk)
        return allowed is not None and allowed.admits(user, groups)

    def approvals_needed(self, risk: RiskClass) -> int:
        """How many distinct approvers a proposal of class ``risk`` needs."""
        return 2 if risk in self.two_person else 1
