"""Policy evaluation cost per tick for 10 to 10,000 policies, next to a real Prometheus.

For each size N, in the same run:

* **governor**: N threshold policies (``when: kv_usage > 0.{i}`` or ``running > {j}.0 &&
  waiting > 1.0``, ``for: 30s``, one in five setting ``max_num_seqs`` inside an envelope),
  spread over four targets, are loaded with ``parse_policy`` (YAML, validation, CEL compile:
  the one-time cost per policy), then :func:`daemon.policy.tick.tick` runs on views where every
  signal they read is fresh, one tick per simulated second, carrying the states (and the knob
  history of accepted changes) from tick to tick, so the window crosses the 30 s ``for`` and
  the ticks where policies start firing and act. Median and p95 of the per-tick time, after
  warm-up ticks that are thrown away.
* **Prometheus**: the equivalent N alerting rules (``kv_usage{target="t1"} > 0.{i}`` ...,
  ``for: 30s``) in one group with a 1 s interval, over the same values served as gauges by a
  loopback exporter and scraped every second. Its own ``/metrics`` is polled; each group
  evaluation's ``prometheus_rule_group_last_duration_seconds`` after the first scrape is kept
  (median and p95), with ``prometheus_rule_evaluation_duration_seconds`` (per rule, median).
  Each size has ``--seconds`` of wall time, start included; a size that does not start or
  evaluate three times within it is skipped with a message. Prometheus is always killed.

Growth is the ratio of per-tick (per-evaluation) time between consecutive sizes, next to the
ratio of the sizes: linear growth is about x10 per x10. Prometheus runs only while the
governor is not being timed, so the two do not compete for the CPUs.

    .venv/bin/python -m bench.policy_eval [--sizes 10,100,1000,10000] [--seconds 45]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from daemon.core.settings import Envelope
from daemon.policy.evaluate import TargetView
from daemon.policy.expressions import compile_condition
from daemon.policy.loading import parse_policy
from daemon.policy.planner import KnobHistory, KnobKey
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.tick import StateKey, tick
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.prometheus import Prometheus

TARGETS = ("t0", "t1", "t2", "t3")
# The values every target shows; about half of the conditions hold.
KV_USAGE = {"t0": 0.35, "t1": 0.5, "t2": 0.65, "t3": 0.8}
RUNNING = {"t0": 20.0, "t1": 40.0, "t2": 60.0, "t3": 80.0}
WAITING = {"t0": 0.0, "t1": 2.0, "t2": 4.0, "t3": 8.0}
KNOB = "max_num_seqs"
ENVELOPE = Envelope(min=32, max=512, max_step=64, min_dwell_s=900, hourly_budget=2)
WARM_UP_TICKS = 3
GROUP = "bench"


@dataclass(frozen=True, slots=True)
class Rule:
    """One threshold, as a governor policy and as a Prometheus alerting rule."""

    name: str
    target: str
    cel: str
    promql: str
    acts: bool


def rules(count: int) -> list[Rule]:
    """``count`` thresholds, alternating between the KV and the queue conditions."""
    out = []
    for i in range(count):
        target = TARGETS[(i // 2) % len(TARGETS)]
        where = f'{{target="{target}"}}'
        if i % 2 == 0:
            cel, promql = f"kv_usage > 0.{i}", f"kv_usage{where} > 0.{i}"
        else:
            j = i % 100
            cel = f"running > {j}.0 && waiting > 1.0"
            promql = f"running{where} > {j} and waiting{where} > 1"
        out.append(Rule(f"p{i:05d}", target, cel, promql, acts=i % 5 == 0))
    return out


def policy_yaml(rule: Rule) -> str:
    """The policy file of ``rule``."""
    text = (
        f"name: {rule.name}\n"
        f"description: benchmark threshold {rule.name}\n"
        f"targets: [{rule.target}]\n"
        f'when: "{rule.cel}"\n'
        "for: 30s\n"
        "cooldown: 10m\n"
    )
    if rule.acts:
        text += f'action:\n  set: {{{KNOB}: "math.greatest(current * 0.9, 32.0)"}}\n  risk: auto\n'
    return text


def rules_file(path: Path, thresholds: list[Rule]) -> Path:
    """A Prometheus rule file with one group, evaluated every second (JSON is YAML)."""
    group = {
        "name": GROUP,
        "interval": "1s",
        "rules": [{"alert": r.name, "expr": r.promql, "for": "30s"} for r in thresholds],
    }
    path.write_text(json.dumps({"groups": [group]}))
    return path


def exporter_page() -> bytes:
    """The gauges every target shows, as the exporter serves them."""
    lines = []
    for name, values in (("kv_usage", KV_USAGE), ("running", RUNNING), ("waiting", WAITING)):
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f'{name}{{target="{t}"}} {value!r}' for t, value in values.items())
    return ("\n".join(lines) + "\n").encode()


@dataclass
class GovernorResult:
    """What the governor's engine cost for one size."""

    policies: int
    load_us_per_policy: float
    cel_compile_us_per_policy: float
    ticks: int
    tick_median_ms: float
    tick_p95_ms: float
    tick_max_ms: float
    us_per_policy_tick: float
    holding: int
    accepted: int


@dataclass
class PrometheusResult:
    """What Prometheus' rule group cost for one size (None fields: skipped)."""

    rules: int
    skipped: str = ""
    start_s: float = 0.0
    evaluations: int = 0
    group_median_ms: float = 0.0
    group_p95_ms: float = 0.0
    group_max_ms: float = 0.0
    us_per_rule: float = 0.0
    rule_eval_median_us: float = 0.0
    missed_iterations: float = 0.0
    holding: int = 0
    samples_ms: list[float] = field(default_factory=list)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def load(thresholds: list[Rule]) -> tuple[list[PolicySpec], float, float]:
    """Parse every policy; the specs and µs per policy for the load and for CEL alone."""
    targets = frozenset(TARGETS)
    texts = [(policy_yaml(r), Path(f"policies/{r.name}.yaml")) for r in thresholds]
    started = time.perf_counter()
    specs = [parse_policy(text, path, targets) for text, path in texts]
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    for rule in thresholds:
        compile_condition(rule.cel)
    compiled = time.perf_counter() - started
    count = len(thresholds)
    return specs, 1e6 * loaded / count, 1e6 * compiled / count


def run_ticks(
    specs: list[PolicySpec], ticks: int
) -> tuple[list[float], dict[StateKey, PolicyState], int]:
    """``ticks`` ticks one simulated second apart: seconds per tick, final states, accepted."""
    views = {
        t: TargetView(
            t,
            {"kv_usage": KV_USAGE[t], "running": RUNNING[t], "waiting": WAITING[t]},
            {KNOB: 256.0},
        )
        for t in TARGETS
    }
    envelopes: dict[KnobKey, Envelope] = {(t, KNOB): ENVELOPE for t in TARGETS}
    history: dict[KnobKey, KnobHistory] = {}
    states: dict[StateKey, PolicyState] = {}
    wall = datetime(2025, 1, 1, 12, tzinfo=UTC)
    durations, accepted = [], 0
    for second in range(ticks):
        now = float(second)
        started = time.perf_counter()
        result = tick(
            specs, states, views, envelopes=envelopes, history=history, now=now, wall=wall
        )
        durations.append(time.perf_counter() - started)
        states = result.states
        for decision in result.accepted:  # applied at once, as the gate would on auto risk
            assert decision.intent is not None
            for knob in decision.intent.changes:
                key = (decision.target, knob)
                history[key] = history.get(key, KnobHistory()).changed(now)
            accepted += 1
    return durations, states, accepted


def measure_governor(count: int, ticks: int) -> GovernorResult:
    """Load ``count`` policies and time the ticks."""
    specs, load_us, cel_us = load(rules(count))
    run_ticks(specs, WARM_UP_TICKS)  # thrown away: first calls, caches
    durations, states, accepted = run_ticks(specs, ticks)
    median = statistics.median(durations)
    holding = sum(state.phase in {Phase.PENDING, Phase.FIRING} for state in states.values())
    return GovernorResult(
        policies=count,
        load_us_per_policy=round(load_us, 1),
        cel_compile_us_per_policy=round(cel_us, 1),
        ticks=ticks,
        tick_median_ms=round(1e3 * median, 3),
        tick_p95_ms=round(1e3 * _p95(durations), 3),
        tick_max_ms=round(1e3 * max(durations), 3),
        us_per_policy_tick=round(1e6 * median / count, 2),
        holding=holding,
        accepted=accepted,
    )


def _metrics(server: Prometheus) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = server.get("/metrics")
    if status != 200:
        return {}
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def _group_value(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    for (sample, labels), value in metrics.items():
        if sample == name and dict(labels).get("rule_group", "").endswith(f";{GROUP}"):
            return value
    return float("nan")


def _holding(server: Prometheus) -> int:
    query = urllib.parse.urlencode({"query": "count(ALERTS) or vector(0)"})
    status, body = server.get(f"/api/v1/query?{query}")
    if status != 200:
        return -1
    return int(float(json.loads(body)["data"]["result"][0]["value"][1]))


def measure_prometheus(
    executable: str, exporter: FixtureExporter, count: int, seconds: float, scratch: Path
) -> PrometheusResult:
    """Run Prometheus with ``count`` rules for at most ``seconds``; always killed."""
    result = PrometheusResult(rules=count)
    directory = scratch / f"prometheus-{count}"
    directory.mkdir()
    rules_path = rules_file(directory / "rules.yml", rules(count))
    started = time.monotonic()
    deadline = started + seconds
    server = Prometheus(
        executable,
        directory,
        f"127.0.0.1:{exporter.port}",
        rule_files=[rules_path],
        start_timeout_s=seconds,
    )
    try:
        try:
            server.start()
        except RuntimeError as exc:
            result.skipped = f"did not start and scrape within {seconds:g} s ({str(exc)[:120]!r})"
            return result
        result.start_s = round(time.monotonic() - started, 1)
        scraped_at = time.time()
        seen: dict[float, float] = {}  # last evaluation timestamp -> its duration
        metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        while time.monotonic() < deadline:
            metrics = _metrics(server) or metrics
            at = _group_value(metrics, "prometheus_rule_group_last_evaluation_timestamp_seconds")
            took = _group_value(metrics, "prometheus_rule_group_last_duration_seconds")
            if at > scraped_at and took == took:  # an evaluation on scraped data (not NaN)
                seen[at] = took
            time.sleep(0.25)
        result.evaluations = len(seen)
        if len(seen) < 3:
            result.skipped = (
                f"only {len(seen)} group evaluation(s) after the first scrape within {seconds:g} s"
            )
            return result
        samples = [1e3 * value for value in seen.values()]
        median = statistics.median(samples)
        result.samples_ms = [round(s, 3) for s in samples]
        result.group_median_ms = round(median, 3)
        result.group_p95_ms = round(_p95(samples), 3)
        result.group_max_ms = round(max(samples), 3)
        result.us_per_rule = round(1e3 * median / count, 2)
        per_rule = metrics.get(
            ("prometheus_rule_evaluation_duration_seconds", (("quantile", "0.5"),)), float("nan")
        )
        result.rule_eval_median_us = round(1e6 * per_rule, 1)
        result.missed_iterations = _group_value(
            metrics, "prometheus_rule_group_iterations_missed_total"
        )
        result.holding = _holding(server)
        return result
    finally:
        server.stop()


def _growth(values: list[float], sizes: list[int], index: int) -> str:
    if index == 0 or not values[index - 1] or not values[index]:
        return "-"
    return f"x{values[index] / values[index - 1]:.1f}/x{sizes[index] / sizes[index - 1]:g}"


def report(governor: list[GovernorResult], prometheus: list[PrometheusResult]) -> None:
    """The tables and the conclusion."""
    sizes = [g.policies for g in governor]
    print("\ngovernor engine (tick(): every policy on every target, then the planner)")
    print(
        f"{'policies':>8} {'load us/pol':>11} {'(CEL us)':>9} {'tick med ms':>11}"
        f" {'p95 ms':>9} {'max ms':>9} {'us/pol/tick':>11} {'growth':>10} {'holding':>8}"
        f" {'acted':>6}"
    )
    medians = [g.tick_median_ms for g in governor]
    for index, g in enumerate(governor):
        print(
            f"{g.policies:>8} {g.load_us_per_policy:>11.1f} {g.cel_compile_us_per_policy:>9.1f}"
            f" {g.tick_median_ms:>11.3f} {g.tick_p95_ms:>9.3f} {g.tick_max_ms:>9.3f}"
            f" {g.us_per_policy_tick:>11.2f} {_growth(medians, sizes, index):>10}"
            f" {g.holding:>8} {g.accepted:>6}"
        )
    print(
        "\nPrometheus (one rule group, 1 s interval): prometheus_rule_group_last_duration_seconds"
    )
    print(
        f"{'rules':>8} {'start s':>7} {'evals':>5} {'group med ms':>12} {'p95 ms':>9}"
        f" {'max ms':>9} {'us/rule':>8} {'growth':>10} {'rule q50 us':>11} {'missed':>6}"
        f" {'alerts':>6}"
    )
    prom_medians = [p.group_median_ms for p in prometheus]
    for index, p in enumerate(prometheus):
        if p.skipped:
            print(f"{p.rules:>8} skipped: {p.skipped}")
            continue
        print(
            f"{p.rules:>8} {p.start_s:>7.1f} {p.evaluations:>5} {p.group_median_ms:>12.3f}"
            f" {p.group_p95_ms:>9.3f} {p.group_max_ms:>9.3f} {p.us_per_rule:>8.2f}"
            f" {_growth(prom_medians, sizes, index):>10} {p.rule_eval_median_us:>11.1f}"
            f" {p.missed_iterations:>6g} {p.holding:>6}"
        )
    print("\nside by side (medians)")
    print(f"{'size':>8} {'governor tick ms':>16} {'Prometheus group ms':>19} {'governor/Prom':>13}")
    for g, p in zip(governor, prometheus, strict=True):
        prom = "skipped" if p.skipped else f"{p.group_median_ms:.3f}"
        ratio = "-" if p.skipped else f"x{g.tick_median_ms / p.group_median_ms:.2f}"
        print(f"{g.policies:>8} {g.tick_median_ms:>16.3f} {prom:>19} {ratio:>13}")
    largest = governor[-1]
    growth = ", ".join(_growth(medians, sizes, i) for i in range(1, len(sizes))) or "-"
    done = [p for p in prometheus if not p.skipped]
    prom_text = "all sizes skipped"
    if done:
        last = done[-1]
        prom_growth = ", ".join(
            _growth(prom_medians, sizes, i)
            for i in range(1, len(sizes))
            if not prometheus[i].skipped and not prometheus[i - 1].skipped
        )
        prom_text = (
            f"{last.us_per_rule:.2f} us/rule/evaluation at {last.rules} rules"
            f" ({last.group_median_ms:.1f} ms per group), growth {prom_growth or '-'}"
        )
    print(
        f"\nconclusion: governor: {largest.us_per_policy_tick:.2f} us/policy/tick at"
        f" {largest.policies} policies ({largest.tick_median_ms:.1f} ms per tick), growth"
        f" {growth} (linear = x10/x10), load {largest.load_us_per_policy:.0f} us/policy once;"
        f" Prometheus: {prom_text}"
    )


def main() -> None:
    """Measure every size, governor then Prometheus, and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument(
        "--seconds",
        type=float,
        default=45.0,
        help="wall-clock limit per size for Prometheus, start included (default 45: the"
        " window after the first scrape then crosses the rules' 30 s `for`)",
    )
    parser.add_argument(
        "--ticks", type=int, default=40, help="timed governor ticks, 1 simulated s apart"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    executable = shutil.which("prometheus")
    began = time.monotonic()
    governor: list[GovernorResult] = []
    prometheus: list[PrometheusResult] = []
    with (
        FixtureExporter(Script(metrics=exporter_page())) as exporter,
        tempfile.TemporaryDirectory(prefix="vg-bench-") as scratch,
    ):
        for size in sizes:
            governor.append(measure_governor(size, args.ticks))
            g = governor[-1]
            print(
                f"governor {size}: {g.tick_median_ms:.3f} ms/tick median,"
                f" load {g.load_us_per_policy:.0f} us/policy",
                flush=True,
            )
            if executable is None:
                prometheus.append(PrometheusResult(size, skipped="prometheus is not installed"))
                continue
            prometheus.append(
                measure_prometheus(executable, exporter, size, args.seconds, Path(scratch))
            )
            p = prometheus[-1]
            state = p.skipped or f"{p.group_median_ms:.3f} ms/group evaluation median"
            print(f"prometheus {size}: {state}", flush=True)
    report(governor, prometheus)
    print(f"\nbenchmark wall time: {time.monotonic() - began:.0f} s")
    if args.json:
        results = {
            "governor": [asdict(g) for g in governor],
            "prometheus": [asdict(p) for p in prometheus],
        }
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
