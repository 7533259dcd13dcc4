"""The panels of the governor's dashboard: what each shows, for people, and its queries.

Queries select by two dashboard variables, ``job`` and ``instance`` (:func:`series`). Counters
of events (decisions, changes, proposals) are shown as they stand, "since the governor
started": the governor creates a labelled counter at its first event, and ``increase()`` over a
window would not count that first one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PanelKind = Literal["stat", "timeseries"]


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL query of a panel and the legend of its series."""

    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel: what it shows, for people (its description), and how.

    Attributes:
        title: Its title.
        description: What it shows and how to read it (Grafana shows it on hover).
        queries: Its queries.
        kind: ``stat`` (a number per series) or ``timeseries``.
        unit: A Grafana unit (``short``, ``s``, ``bytes``, ``percentunit``).
        width: Columns out of 24.
        states: For a 0/1 gauge: the words for 0 and for 1 (red and green).
        names: A stat that shows each series' legend instead of its value (an info metric).
    """

    title: str
    description: str
    queries: tuple[Query, ...]
    kind: PanelKind = "timeseries"
    unit: str = "short"
    width: int = 8
    states: tuple[str, str] | None = None
    names: bool = False


@dataclass(frozen=True, slots=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...]


def series(metric: str, *matchers: str) -> str:
    """``metric`` selected by the dashboard's job and instance, and by ``matchers`` (PromQL)."""
    labels = ['job=~"$job"', 'instance=~"$instance"', *matchers]
    return f"{metric}{{{', '.join(labels)}}}"


def summed(expr: str, *labels: str) -> Query:
    """The query of a count by label: ``expr`` summed by instance and ``labels``.

    Its legend names each sum by the values of every label it keeps, so that no two series of
    a panel read alike.
    """
    kept = ("instance", *labels)
    legend = " ".join(f"{{{{{label}}}}}" for label in kept)
    return Query(f"sum by ({', '.join(kept)}) ({expr})", legend)


_BLOCKED = series("vllm_governor_decisions_total", 'kind="blocked"')
# The guards of the hourly budgets: a policy's (budget_per_hour) and a knob's (hourly_budget).
_BUDGET_BLOCKS = series(
    "vllm_governor_decisions_total", 'kind="blocked"', 'guard=~"budget|knob_budget"'
)

ROWS: tuple[Row, ...] = (
    Row(
        "Governor",
        (
            Panel(
                "Up",
                "Whether Prometheus scrapes the governor (the alert VllmGovernorDown).",
                (Query(series("up"), "{{instance}}"),),
                kind="stat",
                width=4,
                states=("down", "up"),
            ),
            Panel(
                "Ready",
                "1 once every task of the daemon is ready: sources polled, evaluator started.",
                (Query(series("vllm_governor_ready"), "{{instance}}"),),
                kind="stat",
                width=4,
                states=("starting", "ready"),
            ),
            Panel(
                "Last reload",
                "Whether the last reload (SIGHUP, an edited policy file) was applied. While it "
                "was rejected, the old configuration runs: vllm-governor status says why.",
                (Query(series("vllm_governor_config_last_reload_successful"), "{{instance}}"),),
                kind="stat",
                width=4,
                states=("rejected", "applied"),
            ),
            Panel(
                "Uptime",
                "Seconds since the daemon started.",
                (Query(series("vllm_governor_uptime_seconds"), "{{instance}}"),),
                kind="stat",
                unit="s",
                width=4,
            ),
            Panel(
                "Version",
                "The governor's version and its Python, by instance.",
                (Query(series("vllm_governor_build_info"), "{{instance}}: {{version}}"),),
                kind="stat",
                width=8,
                names=True,
            ),
            Panel(
                "Evaluation time",
                "How long one evaluation of every policy takes (99th percentile).",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (instance, le) (rate("
                        f"{series('vllm_governor_evaluation_seconds_bucket')}[5m])))",
                        "{{instance}} p99",
                    ),
                ),
                unit="s",
                width=6,
            ),
            Panel(
                "Evaluations per second",
                "Evaluations of the policies, every governor.evaluation_interval_s; none for "
                "five minutes is the alert VllmGovernorEvaluatorStalled.",
                (
                    Query(
                        f"rate({series('vllm_governor_evaluation_seconds_count')}[5m])",
                        "{{instance}}",
                    ),
                ),
                width=6,
            ),
            Panel(
                "Reloads since start",
                "Reloads of the configuration and policies, applied or rejected.",
                (summed(series("vllm_governor_config_reloads_total"), "outcome"),),
                width=6,
            ),
            Panel(
                "Memory",
                "The daemon's resident memory.",
                (Query(series("vllm_governor_process_resident_memory_bytes"), "{{instance}}"),),
                unit="bytes",
                width=6,
            ),
        ),
    ),
    Row(
        "Sources: what the governor sees",
        (
            Panel(
                "Source up",
                "1 when the source's last poll succeeded. A source down makes its signals "
                "stale, and the policies reading them hold (the alert VllmGovernorSourceStale).",
                (Query(series("vllm_governor_source_up"), "{{instance}} {{source}}"),),
                kind="stat",
                width=12,
                states=("down", "up"),
            ),
            Panel(
                "Polls per second",
                "Polls of each source by outcome. No ok polls is a stale source.",
                (
                    summed(
                        f"rate({series('vllm_governor_source_polls_total')}[5m])",
                        "source",
                        "outcome",
                    ),
                ),
                width=12,
            ),
            Panel(
                "Signal store",
                "Series held in the signal store, and samples dropped by its series cap "
                "(signals.max_series): dropped samples are signals policies do not see.",
                (
                    Query(series("vllm_governor_signal_series"), "{{instance}} series"),
                    Query(series("vllm_governor_signal_samples_dropped"), "{{instance}} dropped"),
                ),
                width=12,
            ),
        ),
    ),
    Row(
        "Policies: what the governor decides",
        (
            Panel(
                "Policies",
                "Policies in force, and policy files left out because they are invalid "
                "(vllm-governor check lists every problem).",
                (
                    Query(series("vllm_governor_policies"), "{{instance}} in force"),
                    Query(series("vllm_governor_policy_files_disabled"), "{{instance}} disabled"),
                ),
                width=6,
            ),
            Panel(
                "Policy errors",
                "Targets on which each policy's condition failed to evaluate at the last "
                "evaluation; the policy holds meanwhile (vllm-governor explain POLICY).",
                (Query(series("vllm_governor_policy_errors"), "{{instance}} {{policy}}"),),
                width=6,
            ),
            Panel(
                "Decisions since start, by kind",
                "fired, resolved, intent, blocked, shadow, alert, notify, error.",
                (summed(series("vllm_governor_decisions_total"), "kind"),),
                width=6,
            ),
            Panel(
                "Blocked since start, by guard",
                "Attempts to act that a guard stopped (cooldown, budget, window, quarantined, "
                "envelope, dwell, ...), by policy.",
                (summed(_BLOCKED, "policy", "guard"),),
                width=6,
            ),
            Panel(
                "Budgets exhausted since start",
                "Attempts to act stopped by a policy's hourly budget (budget) or a knob's "
                "(knob_budget): the alert VllmGovernorBudgetExhausted.",
                (summed(_BUDGET_BLOCKS, "policy", "guard"),),
                width=12,
            ),
            Panel(
                "Notifications since start",
                "Notifications of notify actions by channel and outcome (queued, dropped, "
                "error, no_channel).",
                (summed(series("vllm_governor_notifications_total"), "channel", "outcome"),),
                width=12,
            ),
        ),
    ),
    Row(
        "Changes: what the governor does",
        (
            Panel(
                "Changes since start, by final state",
                "Changes of vLLM servers: done, reverted, failed (people must look), refused "
                "(a check said no: nothing touched), abandoned, dry_run.",
                (summed(series("vllm_governor_actuations_total"), "target", "state"),),
            ),
            Panel(
                "Refusals since start, by check",
                "Which check refused changes of vLLM servers (envelope, budget, dwell, freeze, "
                "in_flight, no_baseline...): one count per check that said no.",
                (summed(series("vllm_governor_actuation_refusals_total"), "target", "guard"),),
            ),
            Panel(
                "Quarantined policies",
                "Policies quarantined on each target after a reverted change, until a person "
                "lifts them (vllm-governor quarantine).",
                (Query(series("vllm_governor_quarantines"), "{{instance}} {{target}}"),),
                kind="stat",
            ),
            Panel(
                "Frozen",
                "Targets a freeze holds: no change is applied to them (vllm-governor unfreeze).",
                (Query(series("vllm_governor_frozen"), "{{instance}} {{target}}"),),
                kind="stat",
                states=("not frozen", "frozen"),
            ),
            Panel(
                "Admission gate cap",
                "The cap in force at each instance's gate (HAProxy maxconn), as last read or "
                "set by the fast loop.",
                (Query(series("vllm_governor_gate_cap"), "{{instance}} {{target}}"),),
                width=12,
            ),
            Panel(
                "Gate cap changes since start",
                "Attempts to move an admission cap, by outcome.",
                (summed(series("vllm_governor_gate_cap_changes_total"), "target", "outcome"),),
                width=12,
            ),
        ),
    ),
    Row(
        "Approvals: what waits for people",
        (
            Panel(
                "Proposals pending",
                "Changes waiting for a person's decision, by target (vllm-governor proposals).",
                (Query(series("vllm_governor_proposals_pending"), "{{instance}} {{target}}"),),
                kind="stat",
                width=12,
            ),
            Panel(
                "Proposals since start, by state reached",
                "pending, approved, rejected, expired (nobody answered: the alert "
                "VllmGovernorProposalsExpired), superseded, applied, verified, ...",
                (summed(series("vllm_governor_approval_outcomes_total"), "state"),),
                width=12,
            ),
        ),
    ),
)
