"""``--load``: replay a trace or a synthetic workload against the server itself.

The arrivals go straight into the engine (no HTTP, no client process) on the server's clock,
so a demo needs no separate load generator. The workload's time 0 is the moment the server
became ready, unless ``--load-origin`` pins it to a Unix time: then a server restarted with
the same origin picks the workload up where the clock says it is, and the arrivals that fell
while it was down are counted as missed (their clients would have found the port closed).
Arrivals refused by the engine (draining, admission limits) are counted by reason. Both go
to the log; the workload does not loop.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simulator.arrivals import Arrival
from simulator.errors import SpecError, SpecIssue
from simulator.server.driver import RealTimeDriver
from simulator.shipped import shipped_input
from simulator.synthetic_workloads import generate, load_workload
from simulator.trace_replay import read_trace

log = logging.getLogger(__name__)


def load_arrivals(spec: str, seed: int | None) -> tuple[list[Arrival], str]:
    """The arrivals of a trace CSV or a workload YAML (a path, or a shipped file's name).

    Returns:
        The arrivals, sorted, and a name for the log.

    Raises:
        SpecError: The file is missing or invalid.
    """
    path = shipped_input(spec)
    if not path.is_file():
        message = "no such trace or workload file, and no shipped one of that name"
        raise SpecError([SpecIssue(path, 0, 0, "", message)])
    if path.suffix == ".csv":
        return read_trace(path, seed=seed or 0), f"trace {path.name}"
    workload = load_workload(path)
    used_seed = workload.seed if seed is None else seed
    return generate(workload, seed), f"workload {workload.name} (seed {used_seed})"


@dataclass
class LoadTally:
    """What became of the replayed arrivals.

    Attributes:
        total: Arrivals in the workload.
        submitted: Taken by the engine.
        missed: Due before the server was ready (it was down).
        rejected: Refused by the engine, by reason.
    """

    total: int
    submitted: int = 0
    missed: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        """One log line."""
        rejected = ", ".join(f"{n} {reason}" for reason, n in sorted(self.rejected.items()))
        pending = self.total - self.submitted - self.missed - self.rejected.total()
        return (
            f"load: {self.submitted} of {self.total} arrivals submitted, "
            f"{self.missed} missed while the server was down, "
            f"{self.rejected.total()} rejected ({rejected or 'none'}), {pending} not yet due"
        )


class LoadGate(Protocol):
    """An admission gate the arrivals pass instead of going straight into the engine."""

    def arrive(self, arrival: Arrival) -> None:
        """The arrival reaches the gate now (the gate counts what becomes of it)."""


async def replay(
    driver: RealTimeDriver,
    arrivals: Sequence[Arrival],
    origin: float,
    tally: LoadTally,
    gate: LoadGate | None = None,
) -> None:
    """Submit each arrival at ``origin + arrived_at`` (simulated seconds) until the last.

    The simulated clock starts when the server becomes ready, so an arrival due before 0
    (an origin in the past) came while the server was down. With a ``gate`` each arrival
    reaches it instead (:mod:`simulator.server.gated_load`).
    """
    clock = driver.clock
    index = 0
    while index < len(arrivals) and origin + arrivals[index].arrived_at < 0.0:
        index += 1
    tally.missed = index
    if index:
        log.info("load: %d arrivals fell while the server was down (refused clients)", index)
    while index < len(arrivals):
        await clock.sleep_until(origin + arrivals[index].arrived_at)
        # Everything due by now goes in at once: one wake-up per burst, not per request.
        now = clock.now()
        while index < len(arrivals) and origin + arrivals[index].arrived_at <= now:
            arrival = arrivals[index]
            index += 1
            if gate is not None:
                gate.arrive(arrival)
                continue
            reason = driver.submit_load(
                arrival.prompt_tokens, arrival.output_tokens, arrival.priority
            )
            if reason is None:
                tally.submitted += 1
            else:
                tally.rejected[reason.value] += 1
    log.info("load: the workload is over; %s", tally.summary())
