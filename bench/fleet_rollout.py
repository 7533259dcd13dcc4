"""A group change rolled over 8 simulated replicas with ``max_unavailable: 1``, canary first.

Eight replicas of one group, each a supervised ``sim serve`` under its own load, each with
what a governor runs for a rollout: its fleet registration (a lease), its side of the group's
restart slots, the real vLLM actuator (every preflight check, the journal, the restart slot,
the wait for ready and the verification) over its own signal plane, and the rollout's driver
and member sides (``daemon/fleet/rollout_*.py``); all eight in this process, against one etcd
member on loopback. One rollout is proposed and approved; the bench then measures:

- capacity at the servers: every replica's ``/health`` polled every 50 ms from a thread;
  the lowest number serving at any sample;
- the canary comparison: the verdict's figures (SLO attainment: the share of requests whose
  first token came within ``--ttft-slo-s``; goodput per server: those per second; errors:
  aborted requests; the canary against the members not yet changed);
- the total time from approval to the rollout's end, and each member's change.

    .venv/bin/python -m bench.fleet_rollout                     # a change that passes
    .venv/bin/python -m bench.fleet_rollout --seqs 1            # one that fails its canary

The members' counts come from each server's own ``/metrics`` (the TTFT histogram's count and
its bucket at the SLO, ``request_success_total{finished_reason="abort"}``), sampled every
0.5 s, as the governor's scrapes would.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import re
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, ChangeRequest, Envelope, SystemClock, VllmInstance
from daemon.core.http_client import HttpLimits, http_request
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.fleet.canary_analysis import CanaryRule, ServerCounts
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.member_resume import FinishedChange, Standing
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar
from daemon.fleet.restart_slots import FleetRestartSlots
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_member import MemberOutcome, RolloutMember
from daemon.fleet.rollout_state import Rollout, propose
from daemon.fleet.rollout_store import RolloutStore
from tests.support.etcd import EtcdCluster
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import SupervisedSim, supervised_sim

KEYS = FleetKeys("/rollout-bench/")
GROUP = "llama"
POLICY = "shrink-seqs"
START_SEQS = 64.0
log = logging.getLogger(__name__)
_SAMPLE = re.compile(r"^vllm:(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def _workload(rate_rps: float, seed: int) -> str:
    return (
        f"name: steady\nduration_s: 3600\nseed: {seed}\narrivals: {{rate_rps: {rate_rps}}}\n"
        "prompt_tokens: {median: 200, p90: 400, max: 1000}\n"
        "output_tokens: {median: 100, p90: 200, max: 400}\n"
    )


@dataclass(frozen=True, slots=True)
class Sample:
    """One scrape of a server's counters."""

    at: datetime
    finished: float
    within_slo: float
    errors: float


class CounterSampler:
    """A server's request counters, scraped every 0.5 s (a restart resets them)."""

    def __init__(self, url: str, ttft_slo_s: float) -> None:
        self._url = url
        self._le = f'le="{ttft_slo_s}"'
        self.samples: list[Sample] = []

    async def run(self) -> None:
        limits = HttpLimits(total_s=2.0, max_body_bytes=4 << 20)
        while True:
            try:
                answer = await http_request("GET", f"{self._url}/metrics", limits)
                if answer.status == 200:
                    self.samples.append(self._parse(answer.body.decode()))
            except Exception:  # a restarting server answers nothing: no sample this time
                log.debug("no scrape", exc_info=True)
            await asyncio.sleep(0.5)

    def _parse(self, text: str) -> Sample:
        finished = within = errors = 0.0
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            name, labels, value = match["name"], match["labels"], float(match["value"])
            if name == "request_success_total" and 'finished_reason="abort"' in labels:
                errors += value
            elif name == "time_to_first_token_seconds_count":
                finished += value  # every request served a first token: the SLO's denominator
            elif name == "time_to_first_token_seconds_bucket" and self._le in labels:
                within += value
        return Sample(datetime.now(UTC), finished, within, errors)

    def counts(self, member: str, since: datetime, until: datetime) -> ServerCounts | None:
        inside = [s for s in self.samples if since <= s.at <= until]
        if len(inside) < 2:
            return None
        first, last = inside[0], inside[-1]
        return ServerCounts(
            member,
            last.finished - first.finished,
            last.within_slo - first.within_slo,
            last.errors - first.errors,
            (last.at - first.at).total_seconds(),
        )


class Actions:
    """One replica's MemberActions: the real vLLM actuator, the server's own counters."""

    def __init__(
        self,
        actuator: VllmActuator,
        journal: SqliteJournal,
        instance: VllmInstance,
        sampler: CounterSampler,
    ) -> None:
        self._actuator = actuator
        self._journal = journal
        self._instance = instance
        self._sampler = sampler
        self.values = {"max_num_seqs": START_SEQS}
        self.changes: list[tuple[float, float, str]] = []  # started, ended, outcome

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        previous = dict(self.values)
        request = ChangeRequest(instance, policy, dict(values), previous, reason, risk="approval")
        started = time.monotonic()
        result = await self._actuator.apply(self._instance, request)
        self.changes.append((started, time.monotonic(), f"{result.state}: {result.outcome}"))
        if result.state == DONE:
            self.values = dict(values)
        return MemberOutcome(result.state == DONE, f"{result.state}: {result.outcome}", previous)

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        last = None if since is None else self._journal.last_finished(instance, policy, since)
        return Standing(
            knobs=dict(self._actuator.current_knobs(self._instance)),
            open_change=self._journal.open_entry(instance) is not None,
            finished=None if last is None else FinishedChange(last.state, last.outcome),
        )

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts | None:
        return self._sampler.counts(instance, since, until)


class Capacity:
    """How many servers answer /health, sampled every 50 ms in a thread; the lowest seen."""

    def __init__(self, sims: list[SupervisedSim]) -> None:
        self._sims = sims
        self._stop = threading.Event()
        self.lowest = len(sims)
        self.samples = 0
        self._thread = threading.Thread(target=self._run, name="capacity", daemon=True)

    def __enter__(self) -> Capacity:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            serving = sum(sim.get("/health", timeout_s=1.0) == (200, "") for sim in self._sims)
            self.lowest = min(self.lowest, serving)
            self.samples += 1
            time.sleep(0.05)


def _lease_of(registrar: Registrar) -> int:
    return registrar.lease


def _instance(sim: SupervisedSim, verify_ttft_ratio: float) -> VllmInstance:
    return VllmInstance(
        name="main",
        url=sim.url,
        scrape_interval_s=0.5,
        config_path=sim.vllm_yaml,
        env_file=sim.env_file,
        restart_command=sim.restart_command(),
        restart_timeout_s=30.0,
        ready_timeout_s=20.0,
        verify_window_s=1.5,
        # A TTFT p95 of a few ms on a shared two-core machine doubles on noise alone.
        verify_max_ttft_p95_ratio=verify_ttft_ratio,
        knobs={
            "max_num_seqs": Envelope(
                min=1, max=4096, max_step=4096, min_dwell_s=0, hourly_budget=20
            )
        },
    )


async def _rollout(
    sims: list[SupervisedSim], endpoints: list[str], args: argparse.Namespace, work: Path
) -> tuple[Rollout, float, list[Actions]]:
    client = EtcdGateway(endpoints, timeout_s=5)
    clock = SystemClock()
    store = RolloutStore(client, KEYS)
    hosts = [f"host-{index}" for index in range(len(sims))]
    members = tuple(f"{host}/main" for host in hosts)
    rule = CanaryRule(window_s=args.window_s, min_requests=20, ttft_slo_s=args.ttft_slo_s)
    all_actions: list[Actions] = []
    drivers: list[RolloutDriver] = []
    async with AsyncExitStack() as stack, asyncio.TaskGroup() as tasks:
        background: list[asyncio.Task[None]] = []
        for host, sim in zip(hosts, sims, strict=True):
            instance = _instance(sim, args.verify_ttft_ratio)
            record = MemberRecord(host, "main", GROUP, "0.33.0", {}, "up")
            registrar = Registrar(
                client,
                KEYS,
                ttl_s=15,
                refresh_s=1,
                facts=functools.partial(list, [record]),
                clock=clock,
            )
            await registrar.refresh()
            slots = FleetRestartSlots(
                client,
                KEYS,
                host=host,
                lease=functools.partial(_lease_of, registrar),
                group_of=lambda _instance: GROUP,
                budget_of=lambda _group: 1,
                wait_s=120,
                poll_s=0.2,
                clock=clock,
            )
            windows = await stack.enter_async_context(live_windows(instance))
            journal = SqliteJournal(work / f"{host}.sqlite3", clock)
            stack.callback(journal.close)
            (work / host).mkdir()
            actuator = VllmActuator(journal, windows, clock, work / host, restart_slots=slots)
            sampler = CounterSampler(sim.url, args.ttft_slo_s)
            actions = Actions(actuator, journal, instance, sampler)
            all_actions.append(actions)
            driver = RolloutDriver(
                store,
                host=host,
                lease=functools.partial(_lease_of, registrar),
                slots_of=lambda _group, _size: 1,
                clock=clock,
                poll_s=0.2,
                moved=lambda _rollout: None,
            )
            drivers.append(driver)
            member = RolloutMember(
                store,
                host=host,
                instances=lambda: ["main"],
                actions=actions,
                clock=clock,
                poll_s=0.2,
            )
            background += [
                tasks.create_task(sampler.run()),
                tasks.create_task(driver.run(lambda: None)),
                tasks.create_task(member.run(lambda: None)),
                tasks.create_task(registrar.run(lambda: None)),
            ]
        await asyncio.sleep(args.warmup_s)  # every server under load, with counters to compare
        rollout = propose(
            GROUP, POLICY, {"max_num_seqs": args.seqs}, members, members[0], rule=rule
        )
        assert (await store.propose(rollout)).created
        started = time.monotonic()
        assert await drivers[0].decide(GROUP, POLICY, "bench", approved=True) == ""
        while True:
            stored = await store.read(GROUP, POLICY)
            if stored is not None and stored.rollout.phase.finished:
                break
            await asyncio.sleep(0.2)
        total_s = time.monotonic() - started
        for task in background:
            task.cancel()
    return stored.rollout, total_s, all_actions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--seqs", type=float, default=48.0, help="max_num_seqs rolled out")
    parser.add_argument("--rate-rps", type=float, default=4.0, help="load on each replica")
    parser.add_argument("--window-s", type=float, default=10.0, help="canary comparison window")
    parser.add_argument("--ttft-slo-s", type=float, default=1.0, help="a TTFT bucket bound")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument(
        "--verify-ttft-ratio", type=float, default=3.0, help="the actuator's TTFT p95 bound"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the signal planes' "source down" while restarting
    with (
        tempfile.TemporaryDirectory(prefix="rollout-", dir="/tmp") as scratch,
        ExitStack() as stack,
    ):
        work = Path(scratch)
        etcd = stack.enter_context(EtcdCluster(work / "etcd"))
        sims = []
        for index in range(args.replicas):
            directory = work / f"r{index}"
            directory.mkdir()
            load = _workload(args.rate_rps, seed=index + 1)
            sims.append(
                stack.enter_context(
                    supervised_sim(directory, f"max-num-seqs: {int(START_SEQS)}\n", load=load)
                )
            )
        with Capacity(sims) as capacity:
            rollout, total_s, actions = asyncio.run(_rollout(sims, etcd.endpoints, args, work))
        spawns = [sim.spawns() - 1 for sim in sims]
    _report(rollout, total_s, actions, capacity, spawns, args)
    return 0


def _report(
    rollout: Rollout,
    total_s: float,
    actions: list[Actions],
    capacity: Capacity,
    restarts: list[int],
    args: argparse.Namespace,
) -> None:
    replicas = len(actions)
    print(f"rollout of max_num_seqs {START_SEQS:g} -> {args.seqs:g} over {replicas} replicas")
    print(f"  outcome: {rollout.phase.value}")
    print(f"  total time (approval to end): {total_s:.1f} s")
    print(
        f"  capacity at the servers: never below {capacity.lowest}/{replicas} "
        f"({capacity.samples} samples of /health, every 50 ms)"
    )
    print(f"  restarts per replica: {restarts}")
    verdict = rollout.verdict
    if verdict is not None:
        print(
            f"  canary ({rollout.canary}) over {args.window_s:g} s, TTFT SLO {args.ttft_slo_s:g} s:"
        )
        for side, figures in (("canary", verdict.canary), ("baseline", verdict.baseline)):
            print(
                f"    {side:8} servers={figures.servers} finished={figures.finished:g} "
                f"slo_attainment={figures.slo_attainment} goodput/server="
                f"{figures.goodput_per_server} error_rate={figures.error_rate}"
            )
        print(f"    verdict: {'pass' if verdict.passed else 'fail'} {list(verdict.failures)}")
    for index, member in enumerate(actions):
        for started, ended, outcome in member.changes:
            print(f"  host-{index}: change took {ended - started:.1f} s: {outcome[:90]}")
    print("  history:")
    for line in rollout.history:
        print(f"    {line[:160]}")


if __name__ == "__main__":
    sys.exit(main())
