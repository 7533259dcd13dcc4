"""What happened, compared with what a test expects: failures with a readable diff.

At a listed tick the decisions must be exactly the expected ones, in any order: each expected
pattern takes a distinct decision it matches (every key it gives is equal; ``set`` compares
every knob's value after the planner), and no decision may be left over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from daemon.policy.state import Phase
from daemon.policy.testing.places import Place
from daemon.policy.testing.rendering import (
    number,
    render_event,
    render_evidence,
    render_expected,
)
from daemon.policy.testing.suites import Case, Expectation, ExpectedDecision, FinalExpectation
from daemon.policy.testing.timing import format_seconds
from daemon.policy.testing.world import Event, Outcome


@dataclass(frozen=True, slots=True)
class Failure:
    """One way a test failed: where the expectation is written, what, and the diff."""

    place: Place
    message: str
    details: tuple[str, ...] = ()


def check(case: Case, outcome: Outcome, interval_s: float) -> list[Failure]:
    """Every failed expectation of ``case``; empty when it passes."""
    by_tick: dict[int, list[Event]] = {}
    for event in outcome.events:
        by_tick.setdefault(event.tick, []).append(event)
    failures = []
    for expectation in case.expectations:
        failure = _compare(expectation, by_tick, interval_s)
        if failure is not None:
            failures.append(failure)
    for approval in outcome.unanswered:
        at = format_seconds(approval.tick * interval_s)
        answer = "approve" if approval.approve else "reject"
        where = "" if approval.target is None else f" on {approval.target}"
        message = f"at {at}: no pending proposal of {approval.policy}{where} to {answer}"
        failures.append(Failure(approval.place, message))
    if case.final is not None:
        failures.extend(_final(case.final, outcome))
    return sorted(failures, key=lambda failure: (failure.place.line, failure.place.column))


def matches(expected: ExpectedDecision, event: Event) -> bool:
    """Whether ``event`` has every value ``expected`` gives."""
    given = (
        (expected.policy, event.policy),
        (expected.target, event.target),
        (expected.kind, event.kind),
        (expected.guard, event.guard),
        (expected.operation, event.operation),
    )
    if any(want is not None and want != got for want, got in given):
        return False
    return expected.set is None or _same_values(expected.set, event.changes)


def _same_values(want: Mapping[str, float], got: Mapping[str, float] | None) -> bool:
    if got is None or set(want) != set(got):
        return False
    return all(math.isclose(want[k], got[k], rel_tol=1e-9, abs_tol=1e-9) for k in want)


def _compare(
    expectation: Expectation, by_tick: Mapping[int, Sequence[Event]], interval_s: float
) -> Failure | None:
    got = by_tick.get(expectation.tick, [])
    pairs = _pairs(expectation.decisions, got)
    if len(pairs) == len(expectation.decisions) == len(got):
        return None
    lines = []
    for index, event in enumerate(got):
        if index in pairs.values():
            lines.append("  " + render_event(event))
    for index, expected in enumerate(expectation.decisions):
        if index not in pairs:
            elsewhere = _elsewhere(expected, by_tick, expectation.tick, interval_s)
            lines.append(f"- {render_expected(expected)}   # {elsewhere}")
    for index, event in enumerate(got):
        if index not in pairs.values():
            lines.append("+ " + render_event(event))
            lines.extend("      " + line for line in render_evidence(event))
    at = format_seconds(expectation.tick * interval_s)
    message = f"at {at}: the decisions differ (- expected but not made, + made but not expected)"
    return Failure(expectation.place, message, tuple(lines))


def _pairs(expected: Sequence[ExpectedDecision], got: Sequence[Event]) -> dict[int, int]:
    """A largest matching of expected patterns to distinct events (expected -> got index)."""
    owner: dict[int, int] = {}  # got index -> expected index

    def augment(index: int, seen: set[int]) -> bool:
        for candidate, event in enumerate(got):
            if candidate in seen or not matches(expected[index], event):
                continue
            seen.add(candidate)
            if candidate not in owner or augment(owner[candidate], seen):
                owner[candidate] = index
                return True
        return False

    for index in range(len(expected)):
        augment(index, set())
    return {index: candidate for candidate, index in owner.items()}


def _elsewhere(
    expected: ExpectedDecision,
    by_tick: Mapping[int, Sequence[Event]],
    tick: int,
    interval_s: float,
) -> str:
    """Where a missing decision was made instead, to tell a timing slip from a wrong rule."""
    ticks = [t for t, events in by_tick.items() if any(matches(expected, e) for e in events)]
    if not ticks:
        return "never made"
    nearest = min(ticks, key=lambda t: (abs(t - tick), t))
    return f"made at {format_seconds(nearest * interval_s)}"


def _final(final: FinalExpectation, outcome: Outcome) -> list[Failure]:
    lines = []
    for target, knobs in final.knobs.items():
        for knob, want in knobs.items():
            got = outcome.knobs.get(target, {}).get(knob)
            if got is None or not math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9):
                shown = "unknown" if got is None else number(got)
                lines.append(f"knobs.{target}.{knob}: expected {number(want)}, got {shown}")
    for (policy, target), want_phase in final.phases.items():
        got_phase = outcome.phases.get((policy, target), Phase.INACTIVE).value
        if got_phase != want_phase:
            lines.append(f"phases.{policy}.{target}: expected {want_phase}, got {got_phase}")
    if not lines:
        return []
    return [Failure(final.place, "at the end: the state differs", tuple(lines))]
