"""The run's summary, from what the simulated server reported and what the daemon did.

Request counts come only from the server's own lines (``sim serve --summary``, one per
process, in the order they ran; :mod:`simulator.server.run_summary`): nothing is estimated.
Each process says which slice ``[first, next)`` of the workload's arrivals it dealt with, so

- *arrived* is every arrival due before the last process stopped (the largest ``next``);
- *missed while down* are the arrivals no process dealt with: due while the server was
  restarting (their clients found the port closed);
- *in flight at the end* are the requests the last process aborted when the demo stopped
  it: cut off by the end of the demo, not by the governor, so they count neither way;
- every other request that did not complete within the SLO (TTFT <= 2 s, TPOT <= 100 ms)
  is a miss: aborted by a restart, rejected, or late.

SLO attainment is met / (arrived - in flight at the end); goodput is what met the SLO per
second of the run, from the workload's time 0 to the last process's stop. Each server
process is judged on the requests it completed (the share that met the SLO), the measure of
the before/after; what a restart refused or aborted is its cost, counted apart
(:func:`restart_costs`) and as misses in the run's totals.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from daemon.app.demo.approver import Answer, describe
from daemon.app.demo.log_volume import log_lines
from daemon.app.demo.narration import clock

BEHIND_WARNING_S = 1.0
"""Seconds given up behind the step schedule from which the summary warns (a few steps' worth
is scheduling noise)."""


def request_counts(lines: Sequence[dict[str, Any]], ended_at: float) -> dict[str, int]:
    """Requests of the whole run by what became of them.

    ``ended_at`` is when the demo began to stop the server: the last process's aborts are
    the end's only if that process was still serving then (not if a restart stopped it).
    """
    completed = sum(line["requests"]["completed"] for line in lines)
    met = sum(line["met_slo"] for line in lines)
    rejected = sum(line["requests"]["rejected"] for line in lines)
    aborted = sum(line["requests"]["aborted"] for line in lines)
    cut_off = 0
    if lines and lines[-1]["stopped_at"] >= ended_at:
        cut_off = lines[-1]["requests"]["aborted"]
    slices = [line["load"] for line in lines if line.get("load")]
    arrived = max((load["next"] for load in slices), default=0)
    dealt_with = sum(load["next"] - load["first"] for load in slices)
    return {
        "arrived": arrived,
        "completed": completed,
        "met_slo": met,
        "aborted_by_restarts": aborted - cut_off,
        "rejected": rejected,
        "missed_while_down": max(0, arrived - dealt_with),
        "in_flight_at_end": cut_off,
    }


def slo_attainment(counts: dict[str, int]) -> float | None:
    """Share of the judged requests that met the SLO; None when none can be judged."""
    judged = counts["arrived"] - counts["in_flight_at_end"]
    return counts["met_slo"] / judged if judged > 0 else None


def processes(
    lines: Sequence[dict[str, Any]], origin: float, in_flight_at_end: int = 0
) -> list[dict[str, Any]]:
    """Each server process: its settings, its time span, what it served.

    A process stopped while it was still loading never served: its ``from_s`` is None. Its
    SLO attainment leaves out, for the last process, the requests the end cut off.
    """
    spans = []
    for index, line in enumerate(lines):
        requests = line["requests"]
        ended = requests["completed"] + requests["aborted"] + requests["rejected"]
        if index == len(lines) - 1:
            ended -= in_flight_at_end
        ready_at = line["ready_at"]
        spans.append(
            {
                "max_num_seqs": line["settings"]["max_num_seqs"],
                "max_num_batched_tokens": line["settings"]["max_num_batched_tokens"],
                "from_s": None if ready_at is None else round(ready_at - origin, 3),
                "to_s": round(line["stopped_at"] - origin, 3),
                "requests": requests,
                "met_slo": line["met_slo"],
                "slo_attainment": line["met_slo"] / ended if ended else None,
                "completed_met_share": (
                    line["met_slo"] / requests["completed"] if requests["completed"] else None
                ),
                "preemptions": line["preemptions"],
                "load": line.get("load"),
                "gate": line.get("gate"),
            }
        )
    return spans


def after_vs_before(spans: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The last serving process against the one that served before its settings; or None.

    Both served the same workload, one after the other: the earlier with the settings the
    governor then changed (``max-num-seqs``, ``max-num-batched-tokens``), the last with what
    it changed them to. A restart that left them as they were (the disk act's quieter logs)
    is not a before/after of the tuning, so the earlier is the latest process whose settings
    differ from the last's. Each is judged on the requests it completed (the share that met
    the SLO), so that the restart's own cost, the requests refused while the earlier drained
    (or aborted by it), counts in neither and stays in the run's totals. This is the demo's
    before/after, as the server itself counted it; a run with ``--approve deny`` has one
    process and no comparison.
    """
    served = [span for span in spans if span["from_s"] is not None]
    if len(served) < 2:
        return None
    last = served[-1]
    settings = ("max_num_seqs", "max_num_batched_tokens")
    before = [span for span in served if any(span[key] != last[key] for key in settings)]
    if not before:
        return None
    first = before[-1]
    return {
        "before": first["completed_met_share"],
        "after": last["completed_met_share"],
        "before_settings": {key: first[key] for key in settings},
        "after_settings": {key: last[key] for key in settings},
    }


def restart_costs(
    spans: Sequence[dict[str, Any]], actions: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What each restart cost, as measured: time without new requests, requests lost.

    Between two serving processes: the requests the old one refused while it drained and
    those it aborted, the arrivals that fell while none served (the new one loading), the
    seconds from its stop to the new one's readiness, and, from the journal of the change
    that restarted it (``actions`` oldest first, when there are as many), the seconds the
    drain and the restart steps took: the gate's drain (with a gate in front), the server's
    and its stop. With a gate, the old process's refusals count from the restart's start on:
    the gate's 503s before it (a burst, an overload) are not the restart's.
    """
    served = [span for span in spans if span["from_s"] is not None]
    timings = [a.get("timings") or {} for a in actions if (a.get("timings") or {}).get("restart")]
    costs = []
    for index, (old, new) in enumerate(itertools.pairwise(served)):
        missed = None
        if old.get("load") and new.get("load"):
            missed = max(0, new["load"]["first"] - old["load"]["next"])
        timing = timings[index] if index < len(timings) else {}
        draining = timing.get("restart")
        if draining is not None:
            draining = round(draining + (timing.get("drain") or 0.0), 4)
        # The restart began with the drain, which ended when the old process stopped.
        began = round(old["to_s"] - (draining or 0.0), 3)
        costs.append(
            {
                "at_s": began,
                "draining_s": draining,
                "loading_s": round(new["from_s"] - old["to_s"], 3),
                "refused_while_draining": old["requests"]["rejected"]
                - _gate_refused_before(old, began),
                "aborted": old["requests"]["aborted"],
                "missed_while_down": missed,
            }
        )
    return costs


def _gate_refused_before(span: dict[str, Any], at_s: float) -> int:
    """The 503s of a process's gate for requests that arrived before ``at_s`` (run seconds)."""
    gate = span.get("gate") or {}
    return sum(
        refused
        for second, _, refused in gate.get("by_arrival_second", [])
        if span["from_s"] + second + 0.5 < at_s
    )


def summarise(
    lines: Sequence[dict[str, Any]],
    *,
    origin: float,
    ended_at: float,
    answers: Sequence[Answer],
    actions: Sequence[dict[str, Any]],
    final_states: dict[str, str],
    context: dict[str, Any],
    realised: Sequence[dict[str, Any]] = (),
    acts: Sequence[dict[str, Any]] = (),
    logs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary (``--json``): requests, SLO attainment, goodput, restarts, actions.

    Args:
        lines: The server's summary lines, in the order its processes ran.
        origin: Unix time of the workload's time 0.
        ended_at: Unix time at which the demo began to stop the server.
        answers: The demo's answers to proposals.
        actions: The daemon's journal of changes (``status``'s ``actuations``), newest first.
        final_states: Each proposal's state at the end, by id (answers hold the state just
            after the answer: ``approved``, before the change ran).
        context: Keys copied as they are (profile, workload, duration, approve mode...).
        realised: The ``realised`` decisions of tuned changes (measured against the
            prediction), oldest first.
        acts: Each act with the governor and without it (:mod:`~daemon.app.demo.acts`).
        logs: The disk act: the log directory with the governor and without it
            (:mod:`~daemon.app.demo.log_volume`), or None.
    """
    counts = request_counts(lines, ended_at)
    spans = processes(lines, origin, counts["in_flight_at_end"])
    run_s = max(lines[-1]["stopped_at"] - origin, 1e-9) if lines else 0.0
    good_tokens = sum(line["good_output_tokens"] for line in lines)
    tokens = sum(line["output_tokens"] for line in lines)
    return {
        **context,
        "run_s": round(run_s, 3),
        "requests": counts,
        "slo_attainment": slo_attainment(counts),
        "goodput_rps": counts["met_slo"] / run_s if run_s else None,
        "goodput_tok_s": good_tokens / run_s if run_s else None,
        "throughput_tok_s": tokens / run_s if run_s else None,
        "preemptions": sum(line["preemptions"] for line in lines),
        # The simulated server steps in real time; on a busy machine it falls behind its model.
        "behind_schedule_s": round(sum(line.get("given_up_s", 0.0) for line in lines), 3),
        "restarts": max(0, len(lines) - 1),
        "processes": spans,
        "after_vs_before": after_vs_before(spans),
        "restart_costs": restart_costs(spans, list(reversed(actions))),
        "proposals": [
            {
                "id": answer.proposal.get("id"),
                "made_at_s": _seconds_after(answer.proposal.get("created_at"), origin),
                "at_s": round(answer.t, 3),
                "change": describe(answer.proposal),
                "answer": answer.action,
                "accepted": answer.accepted,
                "state": final_states.get(str(answer.proposal.get("id")), answer.state),
                "reason": answer.reason,
                "prediction": answer.proposal.get("forecast"),
            }
            for answer in answers
        ],
        "realised": [_realised(decision) for decision in realised],
        "acts": list(acts),
        "logs": logs,
        "actions": [
            {
                key: action.get(key)
                for key in ("id", "policy", "target", "state", "outcome", "timings")
            }
            for action in reversed(actions)
        ],
    }


def render(summary: dict[str, Any]) -> list[str]:
    """The summary as lines for the terminal: the outcome first, then how it came about."""
    counts = summary["requests"]
    workload = summary.get("duration_s")
    over = f"over the {workload:.0f} s workload" if workload else f"in {summary['run_s']:.0f} s"
    lines = [
        *outcome_lines(summary),
        f"{counts['arrived']} requests arrived {over}: "
        f"{counts['completed']} completed ({counts['met_slo']} within the SLO), "
        f"{counts['aborted_by_restarts']} aborted by restarts, {counts['rejected']} refused, "
        f"{counts['missed_while_down']} missed while the server was down, "
        f"{counts['in_flight_at_end']} still in flight at the end (not judged)",
        f"SLO attainment {_share(summary['slo_attainment'])} (TTFT <= 2 s and TPOT <= 100 ms "
        f"per request); goodput {_number(summary['goodput_rps'], '.1f')} req/s, "
        f"{_number(summary['goodput_tok_s'], '.0f')} tok/s "
        f"(throughput {_number(summary['throughput_tok_s'], '.0f')} tok/s)",
        f"preemptions {summary['preemptions']}, restarts {summary['restarts']}",
    ]
    for index, process in enumerate(summary["processes"], start=1):
        lines.append(_process_line(index, process))
    lines.extend(_cost_line(cost) for cost in summary.get("restart_costs", []))
    for proposal in summary["proposals"]:
        taken = "" if proposal["accepted"] else " (the governor did not take the answer)"
        made = proposal.get("made_at_s")
        when = f"made at {clock(made)}, " if made is not None else ""
        verb = "approved" if proposal["answer"] == "approve" else "rejected"
        lines.append(
            f"  proposal {proposal['id']}: {proposal['change']}: {when}"
            f"{verb} at {clock(proposal['at_s'])}{taken}; finally {proposal['state']}"
        )
    for action in summary["actions"]:
        lines.append(
            f"  change #{action['id']} by {action['policy']} on {action['target']}: "
            f"{action['state']}: {action['outcome'] or '-'}"
        )
    if not summary["proposals"] and not summary["actions"]:
        lines.append("  the governor proposed and changed nothing")
    lines.extend(_prediction_lines(summary))
    lines.extend(act_lines(summary.get("acts", [])))
    lines.extend(log_lines(summary.get("logs")))
    lines.extend(busy_lines(summary))
    return lines


def busy_lines(summary: dict[str, Any]) -> list[str]:
    """A warning when the machine was too busy for the simulated server to keep up."""
    behind = summary.get("behind_schedule_s") or 0.0
    if behind < BEHIND_WARNING_S:
        return []
    return [
        f"warning: the machine was too busy for the simulated server: it fell behind its "
        f"model's step schedule and gave up {behind:.0f} s of it, so this run served worse "
        "than the model does; the runs without the governor, in virtual time, never fall "
        "behind. Run the demo on a machine with a core to spare to compare them fairly."
    ]


def act_lines(acts: Sequence[dict[str, Any]]) -> list[str]:
    """Each act: SLO attainment with the governor (this run) and without it (virtual time)."""
    if not acts:
        return []
    lines = [
        "per act, SLO attainment with the governor (this run) and without it (the same "
        "workload on the starting settings, simulated in virtual time):"
    ]
    for act in acts:
        with_, without = act["with_governor"], act["without_governor"]
        lines.append(
            f"  {act['name']} ({clock(act['from_s'])}-{clock(act['to_s'])}): "
            f"{_share(with_['slo_attainment'])} of {with_['arrived']} requests with the "
            "governor, "
            + (
                "- without (not simulated)"
                if without is None
                else f"{_share(without['slo_attainment'])} of {without['arrived']} without"
            )
            + _gate_words(with_.get("gate"))
        )
    return lines


def _gate_words(gate: dict[str, int] | None) -> str:
    """What the admission gate did in an act: requests it held, requests it refused."""
    if not gate or not (gate["waited"] or gate["refused"]):
        return ""
    return (
        f"; the gate held {gate['waited']} back until the server had room and refused "
        f"{gate['refused']} with a 503 after its queue timeout"
    )


def _prediction_lines(summary: dict[str, Any]) -> list[str]:
    """What each tuned change was predicted to do, and what it was measured to do."""
    lines = []
    for proposal in summary["proposals"]:
        forecast = proposal.get("prediction")
        if forecast:
            now, after = forecast["now"], forecast["after"]
            lines.append(
                f"  predicted for {proposal['change']}: SLO attainment "
                f"{_share(now['slo_attainment'])} -> {_share(after['slo_attainment'])}, goodput "
                f"{now['goodput_rps']:.2f} -> {after['goodput_rps']:.2f} req/s"
            )
    for realised in summary.get("realised", []):
        lines.append(f"  measured: {realised['text']}")
    if any(p.get("prediction") for p in summary["proposals"]) and not summary.get("realised"):
        lines.append("  the change's effect was not measured before the demo ended")
    return lines


def _realised(decision: dict[str, Any]) -> dict[str, Any]:
    """A ``realised`` decision as the summary keeps it: predicted, realised, the error."""
    details = decision.get("details") or {}
    return {
        "policy": decision.get("policy"),
        "target": decision.get("target"),
        "text": details.get("text"),
        **{
            key: details.get(key)
            for key in ("predicted", "realised", "goodput_error", "comparable", "quarantined")
        },
    }


def outcome_lines(summary: dict[str, Any]) -> list[str]:
    """The outcome in a sentence or two: SLO attainment before and after the change."""
    comparison = summary.get("after_vs_before")
    if comparison is None:
        return [
            "outcome: the server kept its starting settings and met the SLO for "
            f"{_share(summary['slo_attainment'])} of the requests"
        ]
    before, after = comparison["before_settings"], comparison["after_settings"]
    moved = ", ".join(
        f"{key.replace('_', '-')} {before[key]} -> {after[key]}"
        for key in before
        if before[key] != after.get(key)
    )
    return [
        f"outcome: after the change ({moved or 'the same settings'}), the server met the SLO "
        f"for {_share(comparison['after'])} of the requests it completed, against "
        f"{_share(comparison['before'])} before it (the same traffic; what the restart refused "
        "or aborted counts as missed in the totals below)"
    ]


def _process_line(index: int, process: dict[str, Any]) -> str:
    head = (
        f"  server process {index}: max-num-seqs {process['max_num_seqs']}, "
        f"max-num-batched-tokens {process['max_num_batched_tokens']}, "
    )
    if process["from_s"] is None:
        return head + f"stopped at {clock(process['to_s'])} while still loading"
    # The first process is ready before the workload's time 0 (the demo's start margin).
    since = "from the start" if process["from_s"] <= 0 else f"from {clock(process['from_s'])}"
    requests = process["requests"]
    return (
        head + f"served {since} to {clock(process['to_s'])}: the SLO was met by "
        f"{_share(process['completed_met_share'])} of the {requests['completed']} requests it "
        f"completed; it refused {requests['rejected']} and aborted {requests['aborted']}; "
        f"{process['preemptions']} preemptions"
    )


def _cost_line(cost: dict[str, Any]) -> str:
    draining = cost["draining_s"]
    without = cost["loading_s"] + (draining or 0.0)
    how = (
        f"draining and stopping {draining:.0f} s, loading {cost['loading_s']:.0f} s"
        if draining is not None
        else f"loading {cost['loading_s']:.0f} s after the drain"
    )
    missed = cost["missed_while_down"]
    return (
        f"  the restart at {clock(cost['at_s'])} cost {without:.0f} s without taking new requests "
        f"({how}): {cost['refused_while_draining']} requests refused while it drained, "
        f"{'-' if missed is None else missed} missed while it loaded, {cost['aborted']} aborted"
    )


def _seconds_after(iso: Any, origin: float) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return round(datetime.fromisoformat(iso).timestamp() - origin, 3)
    except ValueError:
        return None


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
