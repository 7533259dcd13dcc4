"""A paced batch lane: at least its spacing between two starts, on the loop's clock.

Requests that end in the same engine step free their places together; without a pace their
successors all start at once, and their prefills land in one long step that every online
request arriving meanwhile waits for (docs/batch.md, "What inflates online TTFT"). Run in
virtual time: the loop's clock jumps, so the spacing costs no wall time.
"""

from __future__ import annotations

import asyncio
import itertools

from daemon.core.virtual_time import run_in_virtual_time
from daemon.engine.batches.lanes import Lane


async def _starts(lane: Lane, workers: int, rounds: int) -> list[float]:
    """When each request started: ``workers`` workers, each sending ``rounds`` requests.

    The first round's requests all end together (at 5 s); the later ones end at once.
    """
    loop = asyncio.get_running_loop()
    starts: list[float] = []
    release = asyncio.Event()

    async def request() -> None:
        await release.wait()

    async def worker() -> None:
        for _ in range(rounds):
            await lane.room()
            starts.append(loop.time())
            await asyncio.wait({lane.start(request(), name="batch line")})

    async with asyncio.TaskGroup() as group:
        for _ in range(workers):
            group.create_task(worker())
        await asyncio.sleep(5.0)
        release.set()
    return [start - starts[0] for start in starts]


def test_a_paced_lane_spaces_every_start_even_when_room_frees_at_once() -> None:
    lane = Lane("main")
    lane.set(4, "open", "night-batch", spacing_s=0.25)
    starts = run_in_virtual_time(_starts(lane, workers=4, rounds=3))
    assert len(starts) == 12
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert min(gaps) >= 0.25 - 1e-9, gaps
    assert lane.in_flight == 0


def test_an_unpaced_lane_starts_at_once() -> None:
    lane = Lane("main")
    lane.set(4, "open", "night-batch")
    starts = run_in_virtual_time(_starts(lane, workers=4, rounds=2))
    assert starts[:4] == [0.0, 0.0, 0.0, 0.0]
    assert lane.status()["start_spacing_s"] == 0.0
