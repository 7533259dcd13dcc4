"""A group change rolled out with a canary: the rollout's state and its legal moves (pure).

A ``scope: group`` policy that fires on several replicas of a group raises one rollout. Its
life, in the spirit of Argo Rollouts' canary strategy::

    PROPOSED ──approve──> CANARY ──canary applied──> ANALYSIS ──pass──> ROLLING ──all──> DONE
        │                   │                           │                 │
        └─reject─> REJECTED └─canary failed─┐           └─fail─> REVERTING ─canary reverted─┐
                                            v                                               v
                                         ABORTED <───────────── abort (any live phase) ─── ABORTED

Each member of the group (``HOST/INSTANCE``) has a step of its own: WAITING, then APPLY (asked
of the member's governor, which changes its own server through its normal actuation path,
restart slot included), then APPLIED or FAILED; a canary that fails its analysis is asked to
REVERT, then is REVERTED. Only the rollout's driver moves the rollout (every function here
returns a new :class:`Rollout`, the caller writes it with a compare-and-swap on the key's
revision); a member's governor only reports what it did (:class:`MemberReport`), which the
driver folds in with :func:`fold_report`.

An illegal move raises :class:`RolloutMoveError`: a driver acting on a stale or foreign state
must stop, never guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from daemon.fleet.canary_analysis import DEFAULT_RULE, CanaryRule, CanaryVerdict

FORMAT_VERSION = 1


class Phase(Enum):
    """Where a rollout stands."""

    PROPOSED = "proposed"  # one proposal for the group, waiting for a person
    CANARY = "canary"  # the canary member is asked to apply the change
    ANALYSIS = "analysis"  # the canary runs changed; judged over the comparison window
    ROLLING = "rolling"  # the rest, at most max_unavailable at a time
    REVERTING = "reverting"  # the canary failed its analysis and is asked to revert
    DONE = "done"  # every member changed
    REJECTED = "rejected"  # a person said no
    ABORTED = "aborted"  # stopped: failed canary, a member's change failed, or a driver's call

    @property
    def finished(self) -> bool:
        """Whether nothing more happens in this rollout."""
        return self in {Phase.DONE, Phase.REJECTED, Phase.ABORTED}


class Step(Enum):
    """Where one member of the group stands in the rollout."""

    WAITING = "waiting"
    APPLY = "apply"  # its governor is asked to apply the change
    APPLIED = "applied"
    FAILED = "failed"  # the change did not hold (refused, reverted, abandoned)
    REVERT = "revert"  # its governor is asked to put the old values back
    REVERTED = "reverted"


class RolloutMoveError(ValueError):
    """A move that the rollout's state does not allow (a stale or foreign driver)."""


@dataclass(frozen=True, slots=True)
class MemberReport:
    """What a member's governor did when asked (written under the member's own key).

    Attributes:
        member: ``HOST/INSTANCE``.
        asked: The step it answers (APPLY or REVERT).
        ok: Whether the step was done and the server verified healthy.
        detail: The actuation's outcome in words (the journal's reason).
        previous: The knob values the member ran before it applied (what a revert restores).
    """

    member: str
    asked: Step
    ok: bool
    detail: str
    previous: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The report as stored in etcd."""
        body: dict[str, Any] = {"member": self.member, "asked": self.asked.value, "ok": self.ok}
        body |= {"detail": self.detail, "previous": dict(self.previous)}
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> MemberReport:
        """A stored report.

        Raises:
            RolloutMoveError: not a report this version wrote.
        """
        try:
            data = json.loads(raw)
            previous = {str(k): float(v) for k, v in data.get("previous", {}).items()}
            return cls(
                str(data["member"]), Step(data["asked"]), bool(data["ok"]), data["detail"], previous
            )
        except (ValueError, KeyError, TypeError) as exc:
            message = f"a member report that cannot be read: {exc}"
            raise RolloutMoveError(message) from exc


@dataclass(frozen=True, slots=True)
class Rollout:
    """One group change and how far it went.

    Attributes:
        group: The group of replicas.
        policy: The ``scope: group`` policy that raised it.
        changes: The knob values every member is to run (the proposal's values).
        members: Every member of the group when it was proposed (``HOST/INSTANCE``), sorted.
        canary: The member changed first.
        phase: Where it stands.
        steps: Each member's step.
        verdict: The canary analysis, once judged (its figures are the evidence).
        history: What happened, one line a move (the thread and the journal quote it).
        analysis_since: When the canary was verified changed (wall clock, ISO 8601): the
            comparison window starts there.
        rule: How the canary is judged (the proposing policy's, carried so that whichever
            governor drives judges the same way).
        proposal: The id of the proposal a person approved ("" before, or when approved
            without one): it names the rollout's lines in its Slack thread.
        thread: ``(channel, ts)`` of the proposal's Slack message when it was approved
            (empty when not posted yet): whichever governor drives replies there.
        driver: The host of the governor that wrote it last (its driver then).
        started_at: When a person approved it (wall clock, ISO 8601).
        updated_at: When it was last written.
    """

    group: str
    policy: str
    changes: Mapping[str, float]
    members: tuple[str, ...]
    canary: str
    phase: Phase = Phase.PROPOSED
    steps: Mapping[str, Step] = field(default_factory=dict)
    verdict: CanaryVerdict | None = None
    history: tuple[str, ...] = ()
    analysis_since: str = ""
    rule: CanaryRule = DEFAULT_RULE
    proposal: str = ""
    thread: tuple[str, str] = ("", "")
    driver: str = ""
    started_at: str = ""
    updated_at: str = ""

    def step(self, member: str) -> Step:
        """The step of ``member`` (WAITING until the rollout asks something of it)."""
        return self.steps.get(member, Step.WAITING)

    def duty(self, member: str) -> Step | None:
        """What the rollout asks of ``member`` now: APPLY, REVERT, or nothing."""
        step = self.step(member)
        return step if step in {Step.APPLY, Step.REVERT} and not self.phase.finished else None

    def to_json(self) -> bytes:
        """The rollout as stored under its etcd key."""
        body: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "group": self.group,
            "policy": self.policy,
            "changes": dict(self.changes),
            "members": list(self.members),
            "canary": self.canary,
            "phase": self.phase.value,
            "steps": {member: step.value for member, step in sorted(self.steps.items())},
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "history": list(self.history),
            "analysis_since": self.analysis_since,
            "rule": self.rule.to_dict(),
            "proposal": self.proposal,
            "thread": list(self.thread),
            "driver": self.driver,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Rollout:
        """A stored rollout.

        Raises:
            RolloutMoveError: not a rollout this version wrote (a driver must not guess).
        """
        try:
            data = json.loads(raw)
            if data["version"] != FORMAT_VERSION:
                message = f"rollout format {data['version']}, this governor reads {FORMAT_VERSION}"
                raise RolloutMoveError(message)
            verdict = data["verdict"]
            # Read with defaults: a rollout written before these fields existed is still one.
            channel, ts = data.get("thread", ("", ""))
            return cls(
                group=str(data["group"]),
                policy=str(data["policy"]),
                changes={str(k): float(v) for k, v in data["changes"].items()},
                members=tuple(str(m) for m in data["members"]),
                canary=str(data["canary"]),
                phase=Phase(data["phase"]),
                steps={str(m): Step(s) for m, s in data["steps"].items()},
                verdict=CanaryVerdict.from_dict(verdict) if verdict else None,
                history=tuple(str(line) for line in data["history"]),
                analysis_since=str(data["analysis_since"]),
                rule=CanaryRule.from_dict(data["rule"]),
                proposal=str(data.get("proposal", "")),
                thread=(str(channel), str(ts)),
                driver=str(data.get("driver", "")),
                started_at=str(data.get("started_at", "")),
                updated_at=str(data.get("updated_at", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            message = f"a rollout that cannot be read: {exc}"
            raise RolloutMoveError(message) from exc


def propose(
    group: str,
    policy: str,
    changes: Mapping[str, float],
    members: tuple[str, ...],
    canary: str,
    *,
    rule: CanaryRule = DEFAULT_RULE,
) -> Rollout:
    """A new rollout of ``changes`` over ``members``, ``canary`` first, judged by ``rule``."""
    if canary not in members:
        message = f"the canary {canary} is not a member of group {group}"
        raise RolloutMoveError(message)
    if not changes:
        message = "a rollout needs knob values to roll out"
        raise RolloutMoveError(message)
    return Rollout(group, policy, dict(changes), tuple(sorted(members)), canary, rule=rule)


def approve(
    rollout: Rollout,
    by: str,
    members: frozenset[str] = frozenset(),
    *,
    proposal: str = "",
    thread: tuple[str, str] = ("", ""),
    at: str = "",
) -> Rollout:
    """A person approved it: the canary is asked to apply the change.

    ``members`` are the group's members registered now, when known: the rollout covers them
    (and its canary), not only those registered when it was proposed (a governor that
    started a moment later would be left out of the rollout and of the canary's baseline).
    ``proposal`` and ``thread`` name the approved proposal and its Slack message, ``at`` the
    moment (the rollout starts there).
    """
    _expect(rollout, Phase.PROPOSED, "approve")
    if members:
        rollout = replace(rollout, members=tuple(sorted(members | {rollout.canary})))
    rollout = replace(rollout, proposal=proposal, thread=thread, started_at=at)
    return _moved(
        rollout,
        Phase.CANARY,
        {rollout.canary: Step.APPLY},
        f"approved by {by}; canary {rollout.canary} asked to apply",
    )


def reject(rollout: Rollout, by: str) -> Rollout:
    """A person said no: nothing is changed anywhere."""
    _expect(rollout, Phase.PROPOSED, "reject")
    return _moved(rollout, Phase.REJECTED, {}, f"rejected by {by}")


def fold_report(rollout: Rollout, report: MemberReport, now: str) -> Rollout:
    """The rollout once a member's report is taken in (a report for nothing asked is an error).

    The canary's success starts the analysis (at ``now``); its failure, or any member's
    failure while rolling, aborts the rollout (what was applied stays: each change was
    verified healthy on its own). A reverted canary ends a failed analysis.
    """
    if rollout.step(report.member) is not report.asked:
        message = (
            f"{report.member} reports on {report.asked.value}, but its step is "
            f"{rollout.step(report.member).value}"
        )
        raise RolloutMoveError(message)
    line = f"{report.member}: {report.asked.value} {'done' if report.ok else 'failed'}"
    line = f"{line} ({report.detail})" if report.detail else line
    if report.asked is Step.REVERT:
        after = Step.REVERTED if report.ok else Step.FAILED
        return _moved(rollout, Phase.ABORTED, {report.member: after}, line)
    if not report.ok:
        return _moved(rollout, Phase.ABORTED, {report.member: Step.FAILED}, line)
    applied = {report.member: Step.APPLIED}
    if rollout.phase is Phase.CANARY:
        moved = _moved(rollout, Phase.ANALYSIS, applied, line)
        return replace(moved, analysis_since=now)
    _expect(rollout, Phase.ROLLING, "take in a member's change")
    rolled = _moved(rollout, Phase.ROLLING, applied, line)
    if all(rolled.step(member) is Step.APPLIED for member in rolled.members):
        return _moved(rolled, Phase.DONE, {}, "every member changed")
    return rolled


def judge(rollout: Rollout, verdict: CanaryVerdict) -> Rollout:
    """The canary analysis decided: roll on, or revert the canary."""
    _expect(rollout, Phase.ANALYSIS, "judge the canary")
    if verdict.passed:
        judged = _moved(rollout, Phase.ROLLING, {}, f"canary passed: {verdict.summary()}")
        if all(judged.step(member) is Step.APPLIED for member in judged.members):
            judged = _moved(judged, Phase.DONE, {}, "every member changed")
    else:
        judged = _moved(
            rollout,
            Phase.REVERTING,
            {rollout.canary: Step.REVERT},
            f"canary failed: {verdict.summary()}; {rollout.canary} asked to revert",
        )
    return replace(judged, verdict=verdict)


def assign(rollout: Rollout, slots: int) -> Rollout:
    """Ask the next waiting members to apply, so that at most ``slots`` are in flight.

    ``slots`` is the group's ``max_unavailable`` in replicas: the rollout never asks more of
    its members at once than the disruption budget lets restart (each restart still takes a
    slot of its own; this keeps the rollout from queueing members on the semaphore).
    """
    _expect(rollout, Phase.ROLLING, "assign members")
    in_flight = sum(rollout.step(member) is Step.APPLY for member in rollout.members)
    waiting = [member for member in rollout.members if rollout.step(member) is Step.WAITING]
    chosen = waiting[: max(0, slots - in_flight)]
    if not chosen:
        return rollout
    asked = dict.fromkeys(chosen, Step.APPLY)
    return _moved(rollout, Phase.ROLLING, asked, f"asked to apply: {', '.join(chosen)}")


def abort(rollout: Rollout, reason: str) -> Rollout:
    """Stop a live rollout: nothing more is asked of anyone (what was applied stays)."""
    if rollout.phase.finished:
        message = f"rollout of {rollout.group} already {rollout.phase.value}"
        raise RolloutMoveError(message)
    return _moved(rollout, Phase.ABORTED, {}, f"aborted: {reason}")


def unchanged_members(rollout: Rollout) -> tuple[str, ...]:
    """The members still on the old values: the canary's baseline."""
    return tuple(m for m in rollout.members if rollout.step(m) in {Step.WAITING, Step.REVERTED})


def _expect(rollout: Rollout, phase: Phase, move: str) -> None:
    if rollout.phase is not phase:
        message = f"cannot {move}: rollout of {rollout.group} is {rollout.phase.value}"
        raise RolloutMoveError(message)


def _moved(rollout: Rollout, phase: Phase, steps: Mapping[str, Step], line: str) -> Rollout:
    unknown = set(steps) - set(rollout.members)
    if unknown:
        message = f"not members of group {rollout.group}: {', '.join(sorted(unknown))}"
        raise RolloutMoveError(message)
    return replace(
        rollout,
        phase=phase,
        steps={**rollout.steps, **steps},
        history=(*rollout.history, line),
    )
