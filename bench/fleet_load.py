"""The etcd load of a fleet of governors, measured with many simulated members, then projected.

One process runs ``--governors`` members of the fleet, each what a governor runs, over the same
client and the same key layout, in three modes, one after the other against the same etcd:

* ``before rollouts`` (the baseline): the fleet registrar (a lease, ``--instances`` records,
  a renewal every ``--refresh-s``) and the freeze watch (one range of the freeze keys every
  ``--refresh-s``): what a governor ran before group rollouts existed;
* ``idle``: the same, plus what every governor runs now for rollouts, the rollout driver and
  the rollout member (each one range of ``rollouts/`` every ``--refresh-s``), with no rollout;
* ``live rollout``: the same, while one rollout over the first instance of every governor is
  in its canary analysis (a window longer than the run): the driver reads its reports, counts
  and members every period; the members read its reports; the others try its driver key.

After all have registered, the load is measured over ``--seconds`` from etcd's own
``/metrics``: requests by method, lease renewals, raft proposals committed, keys, database size,
and the etcd process's CPU and memory. Each mode's rates are printed as ratios to the baseline
measured in the same run (same etcd, same machine, minutes apart), and projected to
``--project`` hosts: every figure grows linearly with the members (one lease each, the same
calls per period), which the run checks by measuring at two fleet sizes.

    .venv/bin/python -m bench.fleet_load --governors 100 300 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import sys
import tempfile
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.fleet.canary_analysis import CanaryRule, ServerCounts
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.freeze_watch import FleetFreezeWatch
from daemon.fleet.keys import FleetKeys
from daemon.fleet.member_resume import Standing
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_member import MemberOutcome, RolloutMember
from daemon.fleet.rollout_state import MemberReport, Step, approve, fold_report, propose
from daemon.fleet.rollout_store import RolloutStore

ROOT = Path(__file__).resolve().parent.parent
BASELINE, IDLE, LIVE = "before rollouts", "idle", "live rollout"
MODES = (BASELINE, IDLE, LIVE)
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


class WallClock:
    """The loop's time for durations, UTC for records (what SystemClock does)."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return datetime.now(UTC)


def etcd_metrics(endpoint: str) -> dict[str, float]:
    """The figures of etcd's /metrics this bench reads, summed over labels it does not need."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    figures: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match["name"], match["labels"] or "", float(match["value"])
        if name == "grpc_server_started_total":
            method = re.search(r'grpc_method="([A-Za-z]+)"', labels)
            key = f"calls:{method[1] if method else '?'}"
            figures[key] = figures.get(key, 0.0) + value
        elif name in (
            "etcd_debugging_lease_renewed_total",
            "etcd_server_proposals_committed_total",
            "etcd_debugging_mvcc_keys_total",
            "etcd_mvcc_db_total_size_in_bytes",
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
        ):
            figures[name] = value
    return figures


class NoActions:
    """A member's actions that a parked rollout never asks for (it asks nothing of anyone)."""

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        return MemberOutcome(False, "the bench changes nothing", {})

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts | None:
        return None

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        return Standing()


async def _park_a_rollout(client: EtcdGateway, keys: FleetKeys, governors: int) -> None:
    """One rollout over every governor's first instance, in an analysis longer than the run."""
    members = tuple(f"gpu-{index:04d}/vllm-0" for index in range(governors))
    rule = CanaryRule(window_s=86400.0)
    proposed = propose("group-0", "bench", {"max_num_seqs": 48}, members, members[0], rule=rule)
    canary = MemberReport(members[0], Step.APPLY, True, "done", {"max_num_seqs": 64})
    analysing = fold_report(approve(proposed, "bench"), canary, datetime.now(UTC).isoformat())
    assert (await RolloutStore(client, keys).propose(analysing)).created


async def run_fleet(
    endpoints: list[str], governors: int, mode: str, args: argparse.Namespace
) -> dict[str, Any]:
    keys = FleetKeys(f"/bench-{governors}-{MODES.index(mode)}/")
    clock = WallClock()
    if mode == LIVE:
        await _park_a_rollout(EtcdGateway(endpoints, timeout_s=5), keys, governors)
    members = []
    for index in range(governors):
        host = f"gpu-{index:04d}"
        records = [
            MemberRecord(host, f"vllm-{i}", f"group-{i}", "0.33.0", {"max_num_seqs": 64}, "up")
            for i in range(args.instances)
        ]
        client = EtcdGateway(endpoints, timeout_s=5)
        registrar = Registrar(
            client,
            keys,
            ttl_s=args.ttl_s,
            refresh_s=args.refresh_s,
            facts=functools.partial(list, records),
            clock=clock,
        )
        watch = FleetFreezeWatch(
            client,
            keys,
            group_of=lambda name: name,
            refresh_s=args.refresh_s,
            stale_after_s=args.ttl_s,
            clock=clock,
        )
        runs = [registrar.run, watch.run]
        if mode != BASELINE:
            store = RolloutStore(client, keys)
            names = [record.instance for record in records]
            runs += [
                RolloutDriver(
                    store,
                    host=host,
                    lease=functools.partial(_lease_of, registrar),
                    slots_of=lambda _group, _size: 1,
                    clock=clock,
                    poll_s=args.refresh_s,
                    moved=lambda _rollout: None,
                ).run,
                RolloutMember(
                    store,
                    host=host,
                    instances=functools.partial(list, names),
                    actions=NoActions(),
                    clock=clock,
                    poll_s=args.refresh_s,
                ).run,
            ]
        members.append((registrar, runs))
    async with asyncio.TaskGroup() as group:
        tasks = []
        for index, (_registrar, runs) in enumerate(members):
            # Spread the members over one period, as independent hosts would be.
            delay = args.refresh_s * index / governors
            tasks.append(group.create_task(_member(runs, delay)))
        await asyncio.sleep(args.refresh_s * 2)  # everyone registered, and renewing
        registered = sum(registrar.reachable is True for registrar, _ in members)
        before = etcd_metrics(endpoints[0])
        start = asyncio.get_running_loop().time()
        await asyncio.sleep(args.seconds)
        after = etcd_metrics(endpoints[0])
        elapsed = asyncio.get_running_loop().time() - start
        failing = sum(registrar.reachable is not True for registrar, _ in members)
        for task in tasks:
            task.cancel()
    rates = {
        key: (after.get(key, 0.0) - before.get(key, 0.0)) / elapsed
        for key in after
        if key.startswith("calls:")
        or key
        in (
            "etcd_debugging_lease_renewed_total",
            "etcd_server_proposals_committed_total",
            "process_cpu_seconds_total",
        )
    }
    return {
        "governors": governors,
        "mode": mode,
        "registered": registered,
        "failing_at_end": failing,
        "elapsed_s": elapsed,
        "rates": {k: v for k, v in rates.items() if v > 0},
        "keys": after.get("etcd_debugging_mvcc_keys_total", 0.0),
        "db_bytes": after.get("etcd_mvcc_db_total_size_in_bytes", 0.0),
        "etcd_rss_bytes": after.get("process_resident_memory_bytes", 0.0),
    }


def _lease_of(registrar: Registrar) -> int:
    return registrar.lease


async def _member(
    runs: Sequence[Callable[[Callable[[], None]], Awaitable[None]]], delay: float
) -> None:
    await asyncio.sleep(delay)
    async with asyncio.TaskGroup() as group:
        for run in runs:
            group.create_task(_started(run))


async def _started(run: Callable[[Callable[[], None]], Awaitable[None]]) -> None:
    await run(lambda: None)


def main() -> None:
    """Measure each mode at each fleet size; print rates, ratios to the baseline, projection."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--governors", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--instances", type=int, default=2, help="vLLM instances per governor")
    parser.add_argument("--refresh-s", type=float, default=5.0)
    parser.add_argument("--ttl-s", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--members", type=int, default=1, help="etcd cluster size")
    parser.add_argument("--project", type=int, default=1000)
    args = parser.parse_args()
    if BASELINE not in args.modes:
        parser.error(f"the baseline ({BASELINE!r}) is measured in every run: ratios need it")
    sys.path.insert(0, str(ROOT))
    # The tests' etcd harness, importable once the project's root is on the path.
    from tests.support.etcd import EtcdCluster  # noqa: PLC0415

    with (
        tempfile.TemporaryDirectory() as directory,
        EtcdCluster(Path(directory), size=args.members) as cluster,
    ):
        results = [
            asyncio.run(run_fleet(cluster.endpoints, n, mode, args))
            for n in args.governors
            for mode in MODES
            if mode in args.modes
        ]
    print(
        f"etcd 3.4 x{args.members} on loopback; refresh {args.refresh_s:g} s, lease "
        f"{args.ttl_s} s, {args.instances} instance(s) per governor; {args.seconds:g} s each"
    )
    for result in results:
        _print_rates(result, args)
    for n in args.governors:
        _print_ratios([r for r in results if r["governors"] == n], args)


def _print_rates(result: dict[str, Any], args: argparse.Namespace) -> None:
    n = result["governors"]
    print(
        f"\n{n} governors, {result['mode']} ({result['registered']} registered, "
        f"{result['failing_at_end']} failing at the end), keys {result['keys']:.0f}, "
        f"db {result['db_bytes'] / 2**10:.0f} KiB, etcd RSS "
        f"{result['etcd_rss_bytes'] / 2**20:.0f} MiB"
    )
    for key, rate in sorted(result["rates"].items()):
        projected = rate / n * args.project
        per_period = rate / n * args.refresh_s
        print(
            f"  {key:42} {rate:8.2f}/s  {per_period:6.3f} per governor per period  "
            f"-> {projected:9.1f}/s at {args.project}"
        )


def _print_ratios(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Each mode's rates over the baseline's, measured minutes apart in this run."""
    (baseline,) = [r for r in results if r["mode"] == BASELINE]
    base = baseline["rates"]
    base_calls = _calls(base)
    print(f"\n{baseline['governors']} governors, ratios to {BASELINE!r} (same run):")
    for result in results:
        if result is baseline:
            continue
        rates = result["rates"]
        methods = sorted({k for k in (*base, *rates) if k.startswith("calls:")})
        parts = [f"{k[6:]} x{_ratio(rates.get(k, 0.0), base.get(k, 0.0))}" for k in methods]
        cpu = "process_cpu_seconds_total"
        print(
            f"  {result['mode']:14} calls x{_ratio(_calls(rates), base_calls)} "
            f"({_calls(rates) / result['governors'] * args.refresh_s:.2f} vs "
            f"{base_calls / baseline['governors'] * args.refresh_s:.2f} per governor per period; "
            f"{', '.join(parts)}); etcd CPU x{_ratio(rates.get(cpu, 0.0), base.get(cpu, 0.0))}"
        )


def _calls(rates: dict[str, float]) -> float:
    return sum(rate for key, rate in rates.items() if key.startswith("calls:"))


def _ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}" if baseline else ("1.00" if not value else "new")


if __name__ == "__main__":
    main()
