"""The etcd load of a fleet of governors, measured with many simulated members, then projected.

One process runs ``--governors`` members of the fleet, each what a governor runs: the fleet
registrar (a lease, ``--instances`` records, a renewal every ``--refresh-s``) and the freeze
watch (one range of the freeze keys every ``--refresh-s``), over the same client and the same
key layout. After all have registered, the load is measured over ``--seconds`` from etcd's own
``/metrics``: requests by method, lease renewals, raft proposals committed, keys, database size,
and the etcd process's CPU and memory. The rates are then projected to ``--project`` hosts:
every figure here grows linearly with the members (one lease each, the same calls per period),
which the run checks by measuring at two fleet sizes.

    .venv/bin/python -m bench.fleet_load --governors 50 100 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import sys
import tempfile
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.freeze_watch import FleetFreezeWatch
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar

ROOT = Path(__file__).resolve().parent.parent
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


async def run_fleet(
    endpoints: list[str], governors: int, args: argparse.Namespace
) -> dict[str, Any]:
    keys = FleetKeys(f"/bench-{governors}/")
    clock = WallClock()
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
        members.append((registrar, watch))
    async with asyncio.TaskGroup() as group:
        tasks = []
        for index, (registrar, watch) in enumerate(members):
            # Spread the members over one period, as independent hosts would be.
            delay = args.refresh_s * index / governors
            tasks.append(group.create_task(_member(registrar, watch, delay)))
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
        "registered": registered,
        "failing_at_end": failing,
        "elapsed_s": elapsed,
        "rates": {k: v for k, v in rates.items() if v > 0},
        "keys": after.get("etcd_debugging_mvcc_keys_total", 0.0),
        "db_bytes": after.get("etcd_mvcc_db_total_size_in_bytes", 0.0),
        "etcd_rss_bytes": after.get("process_resident_memory_bytes", 0.0),
    }


async def _member(registrar: Registrar, watch: FleetFreezeWatch, delay: float) -> None:
    await asyncio.sleep(delay)
    async with asyncio.TaskGroup() as group:
        group.create_task(registrar.run(lambda: None))
        group.create_task(watch.run(lambda: None))


def main() -> None:
    """Measure at each fleet size, print the rates per governor and the projection."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--governors", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--instances", type=int, default=2, help="vLLM instances per governor")
    parser.add_argument("--refresh-s", type=float, default=5.0)
    parser.add_argument("--ttl-s", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--members", type=int, default=1, help="etcd cluster size")
    parser.add_argument("--project", type=int, default=1000)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    # The tests' etcd harness, importable once the project's root is on the path.
    from tests.support.etcd import EtcdCluster  # noqa: PLC0415

    with (
        tempfile.TemporaryDirectory() as directory,
        EtcdCluster(Path(directory), size=args.members) as cluster,
    ):
        results = [asyncio.run(run_fleet(cluster.endpoints, n, args)) for n in args.governors]
    print(
        f"etcd 3.4 x{args.members} on loopback; refresh {args.refresh_s:g} s, lease "
        f"{args.ttl_s} s, {args.instances} instance(s) per governor; {args.seconds:g} s each"
    )
    for result in results:
        n = result["governors"]
        print(
            f"\n{n} governors ({result['registered']} registered, "
            f"{result['failing_at_end']} failing at the end), keys {result['keys']:.0f}, "
            f"db {result['db_bytes'] / 2**10:.0f} KiB, etcd RSS "
            f"{result['etcd_rss_bytes'] / 2**20:.0f} MiB"
        )
        for key, rate in sorted(result["rates"].items()):
            projected = rate / n * args.project
            print(
                f"  {key:42} {rate:8.2f}/s  {rate / n:7.4f}/s per governor  "
                f"-> {projected:9.1f}/s at {args.project}"
            )


if __name__ == "__main__":
    main()
