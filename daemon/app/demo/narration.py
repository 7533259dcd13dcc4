"""The demo's sentences: what the governor waits for, what it changes, what an answer did.

Pure functions of what the control socket said, so that the live panel and the plain lines
tell the same story in the same words, and tests can read them without a terminal. Times are
the demo's clock (``m:ss`` since the workload's time 0); numbers are rounded as people say them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from daemon.approvals.errors import ProposalError
from daemon.approvals.forecast import Forecast
from daemon.core.actuation import JournalState

# A change's journal step, as a newcomer would say what is going on.
_STEPS = {
    "planned": "planned",
    "written": "new settings written to the vLLM YAML",
    "drained": "drained",
    "restarting": "restarting the server: it finishes what it holds and refuses new requests",
    "restarted": "server restarted, loading",
    "ready": "server ready, checking it runs the new settings",
    "verifying": "watching the server to verify the change",
    "reverting": "the change failed verification: reverting",
    "reconciling": "checking a change left open",
}
_STATES: dict[str, str] = {
    JournalState.DONE: "done",
    JournalState.REVERTED: "reverted",
    JournalState.ABANDONED: "abandoned",
    JournalState.FAILED: "FAILED",
    JournalState.REFUSED: "refused",
    JournalState.DRY_RUN: "dry run",
}


def clock(seconds: float) -> str:
    """``m:ss`` since the workload's time 0 (``-0:05`` before it)."""
    sign = "-" if seconds <= -1 else ""
    whole = int(abs(seconds))
    return f"{sign}{whole // 60}:{whole % 60:02d}"


def span(seconds: float) -> str:
    """A duration as people say it: ``45 s``, ``2 min 10 s``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


class Waiting(NamedTuple):
    """One thing the governor waits for: which (policy, target, phase), and the sentence."""

    key: tuple[str, str, str]
    line: str


def waiting_lines(
    policies: Sequence[dict[str, Any]], origin: float, t: float, end: float | None = None
) -> list[Waiting]:
    """What the governor waits for: each pending policy and when it acts; each cooling one.

    ``policies`` is ``status``'s list (each with ``targets``: a state per target, with wall
    times); ``origin`` is the Unix time of the workload's time 0, ``t`` the demo's now and
    ``end`` when the demo ends (a policy that would act later is said to).
    """
    lines = []
    for policy in policies:
        for target, state in policy.get("targets", {}).items():
            name = f"{policy.get('name')} on {target}"
            fires_at, since = state.get("fires_at"), state.get("since")
            cooling = state.get("cooling_down_until")
            if state.get("phase") == "pending" and fires_at is not None:
                at = fires_at - origin
                # A shadow policy, or one without an action, fires and is only recorded.
                verb = "act" if state.get("acts") else "fire (recorded only, no change)"
                held = f"has held since {clock(since - origin)}" if since is not None else "holds"
                if end is not None and at > end:
                    line = (
                        f"{name}: its condition {held}; it would {verb} at {clock(at)}, "
                        "after the demo has ended"
                    )
                else:
                    line = (
                        f"{name}: its condition {held}; it will {verb} at {clock(at)} "
                        f"(in {span(at - t)}) if it keeps holding"
                    )
                lines.append(Waiting((str(policy.get("name")), target, "pending"), line))
            elif cooling is not None and cooling - origin > t:
                until = clock(cooling - origin)
                line = f"{name}: acted; cooling down, it will not act again before {until}"
                lines.append(Waiting((str(policy.get("name")), target, "cooling"), line))
    return lines


def change_line(action: dict[str, Any]) -> str:
    """One change of the journal, in words: ``change #1 by ttft-queue: restarting ...``."""
    head = f"change #{action.get('id')} by {action.get('policy')}"
    state = str(action.get("state"))
    if state == JournalState.OPEN:
        step = str(action.get("step"))
        return f"{head}: {_STEPS.get(step, step.replace('_', ' '))}"
    outcome = action.get("outcome")
    said = _STATES.get(state, state)
    return f"{head}: {said}: {outcome}" if outcome else f"{head}: {said}"


def answer_line(change: str, *, action: str, mode: str, accepted: bool, reason: str) -> str:
    """What an answer did, in words: who answered, and what the governor does next."""
    if action == "approve":
        who = "approved automatically (--approve auto)" if mode == "auto" else "you approved"
        then = "the governor applies it now"
    else:
        who = "rejected automatically (--approve deny)" if mode == "deny" else "you rejected"
        then = "nothing changes"
    if not accepted:
        return f"{who} {change}, but the governor did not take the answer: {reason}"
    return f"{who} {change}; {then}"


# A drain step shorter than this is bookkeeping (no gate, or nothing inside vLLM to wait for).
GATE_DRAIN_SHOWN_S = 0.5


def restart_cost(timings: dict[str, Any]) -> str | None:
    """The measured cost of a change's restart, from its journal timings; None without one.

    The restart step covers the drain: the server finishes what it holds for up to its
    ``shutdown-timeout`` and refuses new requests meanwhile, then the new process loads. With
    a gate in front, the governor drains the gate first (the ``drain`` step: new requests
    wait there, then get their 503) until what vLLM holds has finished.
    """
    restart, ready, drain = timings.get("restart"), timings.get("ready"), timings.get("drain")
    if not isinstance(restart, int | float):
        return None
    waited = float(ready) if isinstance(ready, int | float) else 0.0
    gate = float(drain) if isinstance(drain, int | float) else 0.0
    if gate < GATE_DRAIN_SHOWN_S:
        return (
            f"the restart took {restart + waited:.0f} s without taking new requests "
            f"(draining and stopping {restart:.0f} s, loading {waited:.0f} s)"
        )
    return (
        f"the restart took {gate + restart + waited:.0f} s without taking new requests "
        f"(the gate drained {gate:.0f} s, stopping {restart:.0f} s, loading {waited:.0f} s)"
    )


def forecast_line(proposal: dict[str, Any]) -> str | None:
    """What a tuned proposal's what-if predicts, in words; None for a proposal without one."""
    forecast = _forecast(proposal)
    if forecast is None:
        return None
    return (
        f"the what-if {forecast.effect_text()}; it {forecast.cost_text()}; "
        f"from {forecast.workload_text()}"
    )


def basis_line(proposal: dict[str, Any]) -> str | None:
    """The workload a tuned proposal's prediction rests on; None for a proposal without one.

    The question asked in the terminal shows the proposal's own ``effect`` and ``cost``, which
    for a tuned one are already the prediction; this adds what it was computed from.
    """
    forecast = _forecast(proposal)
    return None if forecast is None else forecast.workload_text()


def _forecast(proposal: dict[str, Any]) -> Forecast | None:
    raw = proposal.get("forecast")
    if not raw:
        return None
    try:
        return Forecast.from_json(raw)
    except ProposalError:
        return None


def realised_line(decision: dict[str, Any]) -> str:
    """A tuned change's measured effect against its prediction, as the governor told it."""
    details = decision.get("details") or {}
    text = details.get("text")
    return f"measured: {text}" if text else f"measured: {decision.get('policy')}: no details"
