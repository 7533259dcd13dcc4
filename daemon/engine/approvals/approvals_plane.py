"""The approvals plane: proposals from approval-risk intents, clicks judged, approved changes run.

Flow::

    Router.submit ──propose──▶ Proposal (from_decision) ── store ── Slack message
    click (Slack button, CLI) ──judge──▶ decide(record, click, Recheck made now) ── store
        └─ approved ──▶ approved-changes runner ──▶ ActuationPlane.apply_approved (the same
           queue and actuator checks as automatic changes) ──▶ applied / verified / reverted /
           failed, recorded and shown in the message and its thread

The store is the truth; Slack only mirrors it
(:mod:`daemon.engine.approvals.slack.slack_messenger`), so a Slack outage delays messages but
never decisions made with the CLI, and never automatic changes. The eternal tasks here: the
*approval sweeper* (expiry, withdrawal) and the *approved-changes runner*
(:mod:`daemon.engine.approvals.approval_runner`); the Slack tasks come from
:class:`~daemon.engine.approvals.slack.slack_link.SlackLink`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from daemon.approvals.authorisation import AllowList, ApprovalRules
from daemon.approvals.clicks import Click
from daemon.approvals.errors import ApprovalError, ProposalError
from daemon.approvals.proposal import Proposal, RiskClass, from_decision
from daemon.approvals.reasons import checked_reason
from daemon.approvals.records import ProposalRecord, State
from daemon.approvals.state_machine import (
    Recheck,
    decide,
    expire,
    supersede,
    withdraw,
)
from daemon.approvals.wording import format_duration
from daemon.core.approval_settings import AllowListSection, ApprovalsSection
from daemon.core.clock import Clock
from daemon.core.freeze_sources import NO_FREEZE_SOURCE, FreezeSource
from daemon.core.secrets import GovernorSecrets
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.actuation.freeze_files import (
    freeze_reason,
    freeze_target,
    remove_freeze,
    write_freeze,
)
from daemon.engine.approvals.approval_desk import ClickAnswer
from daemon.engine.approvals.approval_json import proposal_json
from daemon.engine.approvals.approval_recheck import Lens
from daemon.engine.approvals.approval_runner import ApprovedChangesRunner
from daemon.engine.approvals.fleet_freezes import fleet_freeze, fleet_unfreeze
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.engine.storage.proposal_store import ProposalStore, StoredProposal
from daemon.fleet.freeze_writes import FleetFreezer
from daemon.policy.decisions import Decision

if TYPE_CHECKING:
    from daemon.engine.approvals.slack.slack_link import SlackLink

log = logging.getLogger(__name__)

# proposal, by, approved, its Slack message (channel, ts) -> the group whose rollout takes it
# ("": it is no group change's).
GroupDecision = Callable[[Proposal, str, bool, tuple[str, str]], str]


def no_group_change(proposal: Proposal, by: str, approved: bool, thread: tuple[str, str]) -> str:
    """Without a fleet, no proposal is a group change's."""
    return ""


DECIDED_LISTED = 20
MAX_FREEZE_S = 7 * 86400.0


def rules_of(section: ApprovalsSection) -> ApprovalRules:
    """The state machine's rules from the ``[approvals]`` section."""

    def allow(lists: AllowListSection) -> AllowList:
        return AllowList(frozenset(lists.users), frozenset(lists.groups))

    two = {
        risk
        for risk, lists in (
            (RiskClass.CHANGE, section.change),
            (RiskClass.RESTART, section.restart),
        )
        if lists.two_person
    }
    return ApprovalRules(
        allow={RiskClass.CHANGE: allow(section.change), RiskClass.RESTART: allow(section.restart)},
        two_person=frozenset(two),
    )


class ApprovalsPlane:
    """Owns the proposals: their store, their judgement, their application, their messages."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        clock: Clock,
        registry: CollectorRegistry,
        state_path: Path,
        actuation: ActuationPlane,
        *,
        lens: Lens,
        secrets: GovernorSecrets | None = None,
        host: str | None = None,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
        fleet_freezer: FleetFreezer | None = None,
        group_decision: GroupDecision = no_group_change,
    ) -> None:
        """``lens`` shows the policies as they stand when a click comes (its re-check).

        ``fleet_freeze`` is the fleet's freeze: a click waits for it as for a freeze file (a
        proposal restarts a server, so an unseen fleet makes it wait too); ``fleet_freezer``
        sets and lifts it from chat (None: this governor is in no fleet); ``group_decision``
        takes a decision on a group change's proposal to its rollout (and says it did), which
        the approved-changes runner then leaves alone.
        """
        self._config = config
        self._clock = clock
        self._actuation = actuation
        self._fleet_freeze = fleet_freeze
        self._fleet_freezer = fleet_freezer
        self._group_decision = group_decision
        self._host = host or socket.gethostname()
        self.store = ProposalStore(state_path)
        self.lens = lens
        self.changed = asyncio.Event()
        self._clicks = Counter(
            "vllm_governor_approval_clicks",
            "Clicks on proposals (Slack or CLI) by outcome: accepted or the refusal.",
            ["outcome"],
            registry=registry,
        )
        self._outcomes = Counter(
            "vllm_governor_approval_outcomes",
            "Proposals by the state they reached.",
            ["state"],
            registry=registry,
        )
        self._runner = ApprovedChangesRunner(config, clock, self.store, actuation, self.advance)
        self.slack: SlackLink | None = None
        if config().slack.enabled:
            # slack-sdk and aiohttp weigh ~20 MB: an idle daemon without Slack never loads them.
            from daemon.engine.approvals.slack.slack_link import SlackLink  # noqa: PLC0415

            self.slack = SlackLink.configure(config().slack, secrets, self, clock)

    def pending(self) -> list[dict[str, Any]]:
        """The proposals awaiting a decision, as ``status`` shows them."""
        return [proposal_json(p, self.approvals_needed(p.record)) for p in self.store.pending()]

    @property
    def rules(self) -> ApprovalRules:
        """The authorisation rules in force (they follow configuration reloads)."""
        return rules_of(self._config().approvals)

    def approvals_needed(self, record: ProposalRecord) -> int:
        """How many approvers ``record``'s proposal needs."""
        return self.rules.approvals_needed(record.proposal.risk)

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def tasks(self) -> list[EternalTask]:
        """The sweeper, the approved-changes runner, and the Slack tasks when configured."""
        tasks = [
            EternalTask("approval sweeper", self._sweep),
            EternalTask("approved-changes runner", self._runner.run),
        ]
        if self.slack is not None:
            tasks.extend(self.slack.tasks())
        return tasks

    def propose(self, decision: Decision) -> None:
        """Make, store and announce the proposal of an accepted approval-risk intent."""
        section = self._config().approvals
        now = self._clock.wall()
        try:
            proposal = from_decision(
                decision,
                host=self._host,
                created_at=now,
                ttl_s=section.expiry_s,
                restart_downtime_s=section.restart_downtime_s,
            )
        except ProposalError as exc:
            log.exception("no proposal made", extra={"policy": decision.policy, "error": str(exc)})
            return
        if self.store.get(proposal.id) is not None:
            return  # the very same change at the very same instant: already proposed
        for older in self.store.pending():
            if _overlaps(older.record.proposal, proposal):
                self._save(older, supersede(older.record, proposal.id, now))
        self.store.insert(ProposalRecord(proposal))
        self._outcomes.labels(state=State.PENDING.value).inc()
        log.info(
            "change proposed for approval",
            extra={
                "proposal": proposal.id,
                "policy": proposal.policy,
                "target": proposal.instance,
                "change": proposal.summary(),
                "expires_at": proposal.expires_at.isoformat(),
            },
        )
        self.changed.set()

    def judge(self, click: Click, note: str = "") -> ClickAnswer:
        """Judge a click on the world as it is now; persist and act on the outcome.

        ``note`` is kept as the reason of a rejection. Synchronous on purpose: the record read,
        the re-check and the write happen without yielding to the loop, so no other click can
        slip in between (and the store's revision check stops any other writer).

        Raises:
            ApprovalError: ``note`` is not a usable reason (too long, control characters).
        """
        note = checked_reason(note)
        stored = self.store.get(click.proposal_id)
        if stored is None:
            answer = ClickAnswer(click.proposal_id, "unknown", False, "no such proposal")
            self._clicks.labels(outcome="wrong_proposal").inc()
            return answer
        record = stored.record
        outcome = decide(record, click, self._recheck(record.proposal), self.rules)
        after = outcome.record
        if outcome.accepted and after.state is State.REJECTED and note:
            after = replace(after, reason=note)
        if after != record and not self._save(stored, after):
            self._clicks.labels(outcome="conflict").inc()
            return ClickAnswer(record.proposal.id, record.state.value, False, "try again")
        refusal = None if outcome.refusal is None else outcome.refusal.value
        self.store.log_click(
            click, accepted=outcome.accepted, refusal=refusal, message=outcome.message
        )
        self._clicks.labels(outcome=refusal or "accepted").inc()
        log.info(
            "click judged",
            extra={
                "proposal": record.proposal.id,
                "user": click.user,
                "via": click.via,
                "action": click.action.value,
                "accepted": outcome.accepted,
                "refusal": refusal,
                "state": after.state.value,
                "detail": outcome.message,
            },
        )
        group = ""
        if outcome.apply or (outcome.accepted and after.state is State.REJECTED):
            thread = (stored.channel or "", stored.ts or "")
            group = self._group_decision(record.proposal, click.user, outcome.apply, thread)
        if outcome.apply and group:
            self.store.follow(record.proposal.id, group)  # its record follows the rollout
        elif outcome.apply:
            self._runner.submit(record.proposal.id)
        return ClickAnswer(record.proposal.id, after.state.value, outcome.accepted, outcome.message)

    def listing(self) -> list[dict[str, Any]]:
        """Pending proposals first, then the most recently decided ones."""
        return [
            proposal_json(stored, self.approvals_needed(stored.record))
            for stored in self.store.listing(DECIDED_LISTED)
        ]

    def now(self) -> datetime:
        """The wall clock, as clicks are timed."""
        return self._clock.wall()

    def config(self) -> GovernorConfig:
        """The configuration in force."""
        return self._config()

    def slack_channel(self) -> str:
        """The approvals channel ("" without Slack)."""
        return self._config().slack.channel if self.slack is not None else ""

    def may_freeze(self, user: str, groups: frozenset[str]) -> bool:
        """Whether ``user`` may freeze and unfreeze: anyone on an allow-list may."""
        rules = self.rules
        return any(rules.admits(risk, user, groups) for risk in RiskClass)

    def freeze(self, target: str, duration_s: float, reason: str, *, by: str) -> dict[str, Any]:
        """Freeze ``target`` (an instance, or ``*`` for all) for ``duration_s``; it then expires.

        Raises:
            ApprovalError: an unknown target, a duration out of bounds, or no usable reason.
        """
        config = self._config()
        freeze_target(target, config.target_names())
        reason = checked_reason(reason)
        if not 0 < duration_s <= MAX_FREEZE_S:
            message = (
                f"a freeze lasts more than 0 s and at most {MAX_FREEZE_S / 86400:g} days "
                f"(asked: {format_duration(duration_s)}); freeze again when it ends"
            )
            raise ApprovalError(message)
        if not reason.strip():
            message = "a freeze needs a reason, for the people it stops"
            raise ApprovalError(message)
        until = self._clock.wall() + timedelta(seconds=duration_s)
        path = write_freeze(config.governor.state_dir, target, until, f"{reason} (by {by})")
        log.warning(
            "freeze set",
            extra={"target": target, "until": until.isoformat(), "reason": reason, "by": by},
        )
        return {"target": target, "until": until.isoformat(), "reason": reason, "path": str(path)}

    def unfreeze(self, target: str, *, by: str) -> dict[str, Any]:
        """Lift the freeze of ``target`` (``*``: the global one).

        Raises:
            ApprovalError: an unknown target (the same check as :meth:`freeze`'s).
        """
        config = self._config()
        lifted = remove_freeze(
            config.governor.state_dir, freeze_target(target, config.target_names())
        )
        log.warning("freeze lifted", extra={"target": target, "by": by, "lifted": lifted})
        return {"target": target, "lifted": lifted}

    async def fleet_freeze(
        self, group: str | None, duration_s: float, reason: str, *, by: str
    ) -> dict[str, Any]:
        """Freeze the whole fleet (``group`` None) or one group, in etcd, for ``duration_s``.

        Raises:
            ApprovalError: no fleet here, a bad group, duration or reason.
            FleetError: etcd could not be written.
        """
        return await fleet_freeze(
            self._fleet_freezer, group, duration_s, reason, by=by, now=self._clock.wall()
        )

    async def fleet_unfreeze(self, group: str | None, *, by: str) -> bool:
        """Lift the fleet's freeze (or ``group``'s); False when there was none."""
        return await fleet_unfreeze(self._fleet_freezer, group, by=by)

    async def reply_in_thread(self, policy: str, target: str, text: str) -> bool:
        """Reply in the thread of ``policy``'s latest posted proposal on ``target``.

        Where there is none (an automatic change, or no Slack message yet), the text goes to
        the channel as a plain message. False (logged) when Slack did not take it.
        """
        if self.slack is None:
            log.info("thread reply (no Slack configured)", extra={"target": target, "text": text})
            return False
        latest = next(
            (
                stored
                for stored in sorted(
                    self.store.listing(), key=lambda s: s.record.proposal.created_at, reverse=True
                )
                if stored.record.proposal.policy == policy
                and stored.record.proposal.instance == target
                and stored.ts is not None
            ),
            None,
        )
        if latest is None or latest.channel is None:
            return await self.slack.notify(text, target)
        try:
            await self.slack.api.post(latest.channel, text, thread_ts=latest.ts)
        except ApprovalError as exc:  # SlackCallFailed: the call failed for good
            log.warning("thread reply not sent", extra={"error": str(exc), "target": target})
            return False
        return True

    async def reply_to_proposal(
        self, proposal_id: str, thread: tuple[str, str], text: str, *, about: str
    ) -> bool:
        """Reply in the thread of proposal ``proposal_id`` (a group change's rollout's lines).

        ``thread`` is its message as the rollout carries it (another governor may have posted
        it); this governor's own record of the message serves when it is empty. With neither,
        the text goes to the channel, headed by ``about`` (what it is about).
        """
        channel, ts = thread
        stored = self.store.get(proposal_id) if not ts else None
        if stored is not None and stored.ts is not None:
            channel, ts = stored.channel or "", stored.ts
        if self.slack is None:
            log.info("thread reply (no Slack configured)", extra={"about": about, "text": text})
            return False
        if not ts:
            return await self.slack.notify(text, about)
        try:
            await self.slack.api.post(channel or self.slack_channel(), text, thread_ts=ts)
        except ApprovalError as exc:  # SlackCallFailed: the call failed for good
            log.warning("thread reply not sent", extra={"error": str(exc), "about": about})
            return False
        return True

    async def notify(self, text: str, target: str = "") -> bool:
        """Post a plain message to the approvals channel; False when it could not be sent."""
        if self.slack is None:
            log.info("notification (no Slack configured)", extra={"target": target, "text": text})
            return False
        return await self.slack.notify(text, target)

    def _recheck(self, proposal: Proposal) -> Recheck:
        config = self._config()
        instance = next((i for i in config.vllm if i.name == proposal.instance), None)
        now_knobs: dict[str, float] = {}
        if instance is not None:
            # As the actuator that owns it reads them now (none: the server is observed only).
            now_knobs = dict(self._actuation.knobs().get(instance.name, {}))
        newer = next(
            (
                other.record.proposal.id
                for other in self.store.pending()
                if other.record.proposal.id != proposal.id
                and other.record.proposal.created_at > proposal.created_at
                and _overlaps(other.record.proposal, proposal)
            ),
            None,
        )
        now = self._clock.wall()
        frozen = freeze_reason(config.governor.state_dir, proposal.instance, now) or (
            self._fleet_freeze.freeze_reason(proposal.instance, now, restart=True)
        )
        quarantined = self._actuation.journal.quarantined().get(
            (proposal.policy, proposal.instance)
        )
        veto = self.lens.veto(proposal)
        if quarantined is not None:
            veto = f"a quarantine of {proposal.policy} on {proposal.instance} ({quarantined})"
        holds = self.lens.condition_holds(proposal.policy, proposal.instance)
        return Recheck(
            condition_holds=holds,
            knobs={m.knob: now_knobs.get(m.knob) for m in proposal.moves},
            newer_proposal=newer,
            freeze=frozen or None,
            veto=veto,
        )

    def _save(self, stored: StoredProposal, record: ProposalRecord) -> bool:
        shown = (record.state, record.approvals) != (stored.record.state, stored.record.approvals)
        saved = self.store.save(record, stored.revision, dirty=shown)
        if saved and record.state is not stored.record.state:
            self._outcomes.labels(state=record.state.value).inc()
            self.changed.set()
        elif saved and shown:
            self.changed.set()
        return saved

    def advance(self, proposal_id: str, step: Callable[[ProposalRecord], ProposalRecord]) -> None:
        """Apply a lifecycle step to the stored record (read again if it moved meanwhile)."""
        for _ in range(3):
            stored = self.store.get(proposal_id)
            if stored is None:
                return
            if self._save(stored, step(stored.record)):
                return
        log.error("a proposal kept changing under a step", extra={"proposal": proposal_id})

    async def _sweep(self, readiness: Readiness) -> None:
        # Approved proposals found now were left by an earlier governor: nothing in this one
        # will run them. Their outcome is settled from the journal on each sweep until known.
        interrupted = {stored.record.proposal.id for stored in self.store.approved()}
        readiness.started()
        while True:
            interrupted = self._runner.settle_interrupted(interrupted)
            now = self._clock.wall()
            for stored in self.store.pending():
                record = expire(stored.record, now)
                if record is stored.record:
                    proposal = record.proposal
                    if self.lens.condition_holds(proposal.policy, proposal.instance) is False:
                        record = withdraw(record, now, "the condition stopped holding")
                if record is not stored.record:
                    log.info(
                        "proposal closed while waiting",
                        extra={"proposal": record.proposal.id, "state": record.state.value},
                    )
                    self._save(stored, record)
            await asyncio.sleep(self._config().approvals.sweep_interval_s)


def _overlaps(a: Proposal, b: Proposal) -> bool:
    """Same instance, and a knob in common (or both are operations)."""
    if a.instance != b.instance:
        return False
    if a.operation is not None or b.operation is not None:
        return a.operation == b.operation
    return not {m.knob for m in a.moves}.isdisjoint(m.knob for m in b.moves)
