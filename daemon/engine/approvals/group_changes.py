"""A ``scope: group`` policy's changes: one proposal for the group, its decision to the rollout.

Every governor of a group sees the same thrash, so a group change fires on several members at
once. Each governor's router hands the accepted intent to :class:`GroupProposals`, which
claims the group's rollout key in etcd (a create-only transaction,
:meth:`~daemon.fleet.rollout_store.RolloutStore.propose`) with its own instance as the canary;
only the governor whose claim made the key posts the proposal (one Slack message). The
others post nothing and log who proposed. etcd unreachable: no proposal (nothing can be rolled
out while the fleet cannot be seen; the policy proposes again at its next cooldown).

A person's decision on that proposal goes to the rollout instead of the approved-changes
runner (:class:`GroupDecisions`): the clicking governor becomes the rollout's driver and asks
the canary; the rest is the fleet's rollout (``docs/fleet.md``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from daemon.approvals.proposal import Proposal
from daemon.engine.approvals.approvals_plane import ApprovalsPlane
from daemon.engine.runtime.supervisor import Readiness
from daemon.fleet.canary_analysis import CanaryRule
from daemon.fleet.errors import FleetError
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_state import Rollout, RolloutMoveError, propose
from daemon.fleet.rollout_store import RolloutStore
from daemon.fleet.rollout_thread import Post
from daemon.policy.decisions import Decision

log = logging.getLogger(__name__)

RuleOf = Callable[[str], "CanaryRule | None"]  # a policy's canary rule; None: not a group change


@dataclass(frozen=True, slots=True)
class _Decided:
    group: str
    policy: str
    by: str
    approved: bool
    proposal: str
    thread: tuple[str, str]


def thread_replies(approvals: ApprovalsPlane) -> Post:
    """How the rollout's lines reach its proposal's Slack thread: through the approvals plane."""

    async def post(rollout: Rollout, text: str) -> bool:
        about = f"rollout of {rollout.policy} over group {rollout.group}"
        return await approvals.reply_to_proposal(
            rollout.proposal, rollout.thread, text, about=about
        )

    return post


class GroupDecisions:
    """People's decisions on group proposals, handed to the rollout's driver.

    Args:
        driver: This governor's rollout driver.
        group_of: The fleet group of an instance.
        rule_of: A policy's canary rule (None: it is no group change).
    """

    def __init__(
        self, driver: RolloutDriver, group_of: Callable[[str], str], rule_of: RuleOf
    ) -> None:
        self._driver = driver
        self._group_of = group_of
        self._rule_of = rule_of
        self._decided: asyncio.Queue[_Decided] = asyncio.Queue()

    def decided(self, proposal: Proposal, by: str, approved: bool, thread: tuple[str, str]) -> str:
        """Take a decision on ``proposal`` if it is a group change's; its group, or "".

        ``thread`` is the proposal's Slack message: the rollout carries it, so that whichever
        governor drives it replies there.
        """
        if self._rule_of(proposal.policy) is None:
            return ""
        group = self._group_of(proposal.instance)
        decided = _Decided(group, proposal.policy, by, approved, proposal.id, thread)
        self._decided.put_nowait(decided)
        return group

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: each decision written to its rollout, in the order made."""
        readiness.started()
        while True:
            decided = await self._decided.get()
            try:
                why = await self._driver.decide(
                    decided.group,
                    decided.policy,
                    decided.by,
                    approved=decided.approved,
                    proposal=decided.proposal,
                    thread=decided.thread,
                )
            except FleetError as exc:
                why = f"the fleet cannot be read ({exc})"
            if why:
                log.warning(
                    "group decision not taken",
                    extra={"group": decided.group, "policy": decided.policy, "why": why},
                )
            else:
                log.info(
                    "group change decided",
                    extra={"group": decided.group, "policy": decided.policy, "by": decided.by},
                )


class GroupProposals:
    """The one proposal of a group change, claimed in etcd before it is posted.

    Args:
        store: The rollouts in etcd.
        host: This governor's name in the fleet.
        group_of: The fleet group of an instance.
        rule_of: A policy's canary rule (None: it is no group change).
        post: The approvals plane's ``propose`` (store, announce).
        poll_s: How often a claim looks again for this governor's registration (a policy may
            fire before the registrar's first write).
        wait_s: How long it looks before it gives up (the policy proposes again after its
            cooldown).
    """

    def __init__(
        self,
        store: RolloutStore,
        *,
        host: str,
        group_of: Callable[[str], str],
        rule_of: RuleOf,
        post: Callable[[Decision], None],
        poll_s: float,
        wait_s: float,
    ) -> None:
        self._store = store
        self._host = host
        self._group_of = group_of
        self._rule_of = rule_of
        self._post = post
        self._poll_s = poll_s
        self._wait_s = wait_s
        self._claims: asyncio.Queue[Decision] = asyncio.Queue()

    def propose(self, decision: Decision) -> None:
        """The router's ``propose``: a group change is claimed first, any other posted now."""
        if self._rule_of(decision.policy) is None:
            self._post(decision)
            return
        self._claims.put_nowait(decision)

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: each group change claimed in etcd, posted only by its claimer."""
        readiness.started()
        while True:
            decision = await self._claims.get()
            try:
                await self._claim(decision)
            except (FleetError, RolloutMoveError) as exc:
                log.warning(
                    "group change not proposed",
                    extra={"policy": decision.policy, "target": decision.target, "error": str(exc)},
                )

    async def _claim(self, decision: Decision) -> None:
        rule = self._rule_of(decision.policy)
        if rule is None or decision.intent is None:
            return
        group = self._group_of(decision.target)
        canary = f"{self._host}/{decision.target}"
        members = await self._store.group_members(group)
        for _ in range(int(self._wait_s / self._poll_s)):
            if canary in members:
                break
            await asyncio.sleep(self._poll_s)
            members = await self._store.group_members(group)
        if canary not in members:
            message = f"{canary} is not registered in group {group} yet"
            raise RolloutMoveError(message)
        rollout = propose(
            group, decision.policy, decision.intent.changes, tuple(members), canary, rule=rule
        )
        answer = await self._store.propose(rollout)
        facts = {"group": group, "policy": decision.policy, "canary": canary}
        if answer.created:
            log.info("group change proposed", extra=facts)
            self._post(decision)
            return
        there = answer.stored.rollout
        log.info(
            "group change already proposed",
            extra={**facts, "by_canary": there.canary, "phase": there.phase.value},
        )
