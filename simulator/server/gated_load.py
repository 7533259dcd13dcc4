"""``sim serve --gate-socket PATH``: the replayed load passes an admission gate, as behind HAProxy.

Without it the load goes straight into the engine. With it each arrival reaches a
:class:`~simulator.gate.Gate` first, with the semantics of ``simulate``'s gate
(:mod:`simulator.virtual_time`): at most ``cap`` replayed requests inside the engine at once,
the others wait in arrival order, and one still waiting ``queue_timeout_s`` after it arrived
gets HAProxy's 503 (a rejection for ``queue_timeout``, an SLO miss) and never reaches the
engine. The wait counts in the request's TTFT as its client sees it (the ``--summary``
line's SLO counts), not in vLLM's own histograms on ``/metrics`` (vLLM never sees the gate).
The Unix socket answers HAProxy's runtime API over it
(:class:`~simulator.server.virtual_haproxy.VirtualHaproxy`): the governor's ``[vllm.gate]``
reads it and moves the cap there. Requests sent to the HTTP port do not pass it.

**Across a restart.** HAProxy's gate outlives vLLM's restarts: a cap set live stays (the
governor moves no cap while its change of the server is in flight, and carries a cap that
stood at the old ``max-num-seqs`` to the new one). This gate lives in the server process, so a
restart ends it; with ``--gate-state FILE`` the next process opens at the cap the last one
kept there (:class:`KeptCap`), as HAProxy would still hold it; without, at its own
``max-num-seqs``. Either way it opens not draining, with counters at zero (as vLLM's own
restart), and while the process is down there is no socket (HAProxy would answer, with the
server down). From the new process's readiness to the governor's lift of its drain, this
gate admits where HAProxy's would still hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.arrivals import Arrival
from simulator.gate import Gate, Waiting, timeout_record, waited_record
from simulator.requests import FinishedRequest, RejectReason
from simulator.server.driver import RealTimeDriver
from simulator.server.load_replay import LoadTally

# HAProxy averages ``qtime`` over the last 1024 requests.
_RECENT_WAITS = 1024


@dataclass
class GateTally:
    """What the gate did over this process's life (``gate`` in the ``--summary`` line).

    Attributes:
        waited: Replayed requests let in after waiting at the gate.
        waited_s: Their waits together, in seconds.
        refused: Replayed requests refused with a 503 when their wait ran out.
        waited_by_second: ``waited`` by the whole second of the process's clock at which
            they arrived (the seconds of the line's ``by_arrival_second``).
        refused_by_second: ``refused`` likewise.
    """

    waited: int = 0
    waited_s: float = 0.0
    refused: int = 0
    waited_by_second: Counter[int] = field(default_factory=Counter)
    refused_by_second: Counter[int] = field(default_factory=Counter)

    def line(self, cap: int) -> dict[str, Any]:
        """The ``gate`` object of the summary line; ``cap`` is the cap at the end."""
        seconds = sorted(set(self.waited_by_second) | set(self.refused_by_second))
        return {
            "cap": cap,
            "waited": self.waited,
            "waited_s": round(self.waited_s, 3),
            "refused": self.refused,
            "by_arrival_second": [
                [second, self.waited_by_second[second], self.refused_by_second[second]]
                for second in seconds
            ],
        }


class KeptCap:
    """The file a gate keeps its cap in across the server's restarts (``--gate-state``).

    Written whole and renamed into place, so a process killed mid-write leaves the last cap.
    A file that is missing or does not hold a positive whole number is no kept cap.
    """

    def __init__(self, path: Path) -> None:
        self._path = path

    def read(self) -> int | None:
        """The kept cap, or None."""
        try:
            text = self._path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def write(self, cap: int) -> None:
        """Keep ``cap``."""
        partial = self._path.with_name(self._path.name + ".partial")
        partial.write_text(f"{cap}\n", encoding="ascii")
        partial.replace(self._path)


class GatedLoad:
    """The gate in front of the engine for the replayed load, in real time.

    Args:
        driver: The engine's driver.
        cap: The gate's cap at start (the server's ``max-num-seqs``).
        queue_timeout_s: HAProxy's ``timeout queue``.
        tally: Where the load's fate is counted (taken, refused by reason).
        observe: Told of every replayed request that ends, as its client saw it (the wait
            included; a 503 as a ``queue_timeout`` rejection).
        kept: Where each cap set live is kept for the next process (``--gate-state``).
    """

    def __init__(
        self,
        driver: RealTimeDriver,
        cap: int,
        queue_timeout_s: float,
        tally: LoadTally,
        observe: Callable[[FinishedRequest], None],
        *,
        kept: KeptCap | None = None,
    ) -> None:
        self._driver = driver
        self._kept = kept
        self._gate: Gate[Arrival] = Gate(cap, queue_timeout_s)
        self._tally = tally
        self._observe = observe
        self._waited: dict[str, float] = {}
        self._recent: deque[float] = deque(maxlen=_RECENT_WAITS)
        self._ids = 0
        self._served = 0
        self._wake = asyncio.Event()
        self.counts = GateTally()

    # -- what the runtime API reads and moves (a GateKeeper) ----------------------------

    @property
    def gate(self) -> Gate[Any]:
        """The gate."""
        return self._gate

    @property
    def served(self) -> int:
        """Replayed requests let in that have ended."""
        return self._served

    @property
    def recent_waits(self) -> Sequence[float]:
        """Seconds waited by the last requests let in."""
        return self._recent

    def sync(self) -> None:
        """Refuse what waited too long and let in what the cap allows, now."""
        now = self._driver.clock.now()
        for waiting in self._gate.expire(now):
            self._refuse(waiting)
        for waiting in self._gate.admit(now):
            self._forward(waiting.item, waited_s=now - waiting.arrived_at)

    def set_cap(self, cap: int) -> None:
        """Move the cap live: a raise lets waiting requests in at once."""
        self._gate.set_cap(cap)
        if self._kept is not None:
            self._kept.write(cap)
        self.sync()

    def set_draining(self, draining: bool) -> None:
        """Drain the gate (nothing new goes in) or lift the drain."""
        self._gate.draining = draining
        self.sync()

    # -- the load ------------------------------------------------------------------------

    def arrive(self, arrival: Arrival) -> None:
        """A replayed request reaches the gate now: in at once, or into the queue."""
        now = self._driver.clock.now()
        for waiting in self._gate.expire(now):
            self._refuse(waiting)
        if self._gate.arrive(arrival, now):
            self._forward(arrival, waited_s=0.0)
        else:
            self._wake.set()  # a new deadline to keep

    def finished(self, record: FinishedRequest) -> bool:
        """A request ended in the engine: True (and counted) when it came through the gate."""
        waited = self._waited.pop(record.request_id, None)
        if waited is None:
            return False
        self._gate.release()
        self._served += 1
        self._observe(waited_record(record, waited))
        self._wake.set()  # a slot is free
        return True

    async def run(self) -> None:
        """Keep the queue's deadlines and fill freed slots until cancelled."""
        clock = self._driver.clock
        while True:
            self._wake.clear()
            self.sync()
            deadline = self._gate.next_deadline
            timeout = None if math.isinf(deadline) else max(0.0, deadline - clock.now())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def close(self) -> None:
        """The server stops: what still waits gets its 503 (no server will take it)."""
        for waiting in self._gate.expire(math.inf):
            self._refuse(waiting)

    def _forward(self, arrival: Arrival, *, waited_s: float) -> None:
        self._ids += 1
        request_id = f"gate-{self._ids}"
        self._waited[request_id] = waited_s
        if waited_s > 0:
            self.counts.waited += 1
            self.counts.waited_s += waited_s
            arrived_at = self._driver.clock.now() - waited_s
            self.counts.waited_by_second[int(arrived_at)] += 1
        self._recent.append(waited_s)
        reason = self._driver.submit_load(
            arrival.prompt_tokens, arrival.output_tokens, arrival.priority, request_id=request_id
        )
        if reason is None:
            self._tally.submitted += 1
        else:
            # The engine refused it (draining): its record has already released the slot.
            self._tally.rejected[reason.value] += 1

    def _refuse(self, waiting: Waiting[Arrival]) -> None:
        self._ids += 1
        self.counts.refused += 1
        self.counts.refused_by_second[int(waiting.arrived_at)] += 1
        self._tally.rejected[RejectReason.QUEUE_TIMEOUT.value] += 1
        self._observe(timeout_record(f"gate-{self._ids}", waiting))
