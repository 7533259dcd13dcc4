"""A rollout told in its proposal's Slack thread: one line per step, each with a stable key (pure).

The thread follows the rollout's history (:attr:`~daemon.fleet.rollout_state.Rollout.history`),
which only ever grows: the canary asked to apply, its change done, the canary analysis with
its figures (the canary against the members not yet changed), each member asked and changed,
and at the end one closing line saying where it came to (rolled out, rolled back, stopped).
Each line's key (``h3`` for the fourth line of the history, ``end`` for the closing one) is
what the driver claims in etcd before it posts (:meth:`RolloutStore.claim_line`), so that a
driver resuming a dead one's rollout posts no line twice.

A rollout nobody approved has no lines: its proposal's message says that it waits, or that
it was rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.fleet.canary_analysis import CanaryVerdict, SideFigures
from daemon.fleet.rollout_state import Phase, Rollout, Step

END = "end"
_JUDGED = ("canary passed: ", "canary failed: ")  # how rollout_state.judge starts its line


@dataclass(frozen=True, slots=True)
class ThreadLine:
    """One reply in the proposal's thread.

    Attributes:
        key: Stable across every look at the rollout (``h0``, ``h1``..., ``end``).
        text: What the thread shows.
    """

    key: str
    text: str


def thread_lines(rollout: Rollout) -> list[ThreadLine]:
    """Every line the rollout's thread should have by now, in order."""
    if rollout.phase in {Phase.PROPOSED, Phase.REJECTED}:
        return []
    lines = [
        ThreadLine(f"h{index}", _history_text(rollout, line))
        for index, line in enumerate(rollout.history)
    ]
    if rollout.phase.finished:
        lines.append(ThreadLine(END, closing_text(rollout)))
    return lines


def outcome_of(rollout: Rollout) -> str:
    """Where a finished rollout came to: ``rolled_out``, ``rolled_back`` or ``aborted``.

    Rolled back: the canary failed its analysis and was put back on the old values, nothing
    else was changed. Aborted: stopped for any other reason (a member's change failed, a
    member nobody could act for, a failed revert); what was applied stays.
    """
    if rollout.phase is Phase.DONE:
        return "rolled_out"
    others = [member for member in rollout.members if member != rollout.canary]
    if rollout.step(rollout.canary) is Step.REVERTED and all(
        rollout.step(member) is Step.WAITING for member in others
    ):
        return "rolled_back"
    return "aborted"


def closing_text(rollout: Rollout) -> str:
    """The last line: where the rollout came to, and who runs what now."""
    changed = [m for m in rollout.members if rollout.step(m) is Step.APPLIED]
    values = ", ".join(f"{knob}={value:g}" for knob, value in sorted(rollout.changes.items()))
    outcome = outcome_of(rollout)
    if outcome == "rolled_out":
        return (
            f":white_check_mark: Rolled out: all {len(rollout.members)} members of group "
            f"{rollout.group} run {values}."
        )
    if outcome == "rolled_back":
        return (
            f":leftwards_arrow_with_hook: Rolled back: the canary {rollout.canary} failed its "
            f"analysis and runs the old values again; the rollout stopped, no other member of "
            f"group {rollout.group} was changed."
        )
    why = rollout.history[-1] if rollout.history else "stopped"
    kept = ", ".join(changed) if changed else "none"
    return (
        f":octagonal_sign: Rollout stopped ({why}). Running {values} now: {kept}; "
        f"{len(rollout.members) - len(changed)} of {len(rollout.members)} members not changed."
    )


def analysis_text(rollout: Rollout, verdict: CanaryVerdict) -> str:
    """The canary analysis: both sides' figures and the verdict, as the thread shows it."""
    rule = rollout.rule
    head = f"Canary analysis over {rule.window_s:g} s (TTFT SLO {rule.ttft_slo_s:g} s): " + (
        "*passed*" if verdict.passed else "*failed*"
    )
    lines = [
        head,
        f"• canary {rollout.canary}: {_side(verdict.canary)}",
        f"• baseline, {verdict.baseline.servers} unchanged member(s): {_side(verdict.baseline)}",
    ]
    lines += [f"• {failure}" for failure in verdict.failures]
    if verdict.passed:
        lines.append("Rolling to the other members, within the group's max_unavailable.")
    else:
        lines.append(f"{rollout.canary} asked to revert; the rollout stops.")
    return "\n".join(lines)


def _history_text(rollout: Rollout, line: str) -> str:
    if line.startswith(_JUDGED) and rollout.verdict is not None:
        return analysis_text(rollout, rollout.verdict)
    return line


def _side(figures: SideFigures) -> str:
    return (
        f"{figures.finished:g} requests, SLO attainment {_pct(figures.slo_attainment)}, "
        f"goodput {_num(figures.goodput_per_server)} req/s per server, "
        f"errors {_pct(figures.error_rate)}"
    )


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"
