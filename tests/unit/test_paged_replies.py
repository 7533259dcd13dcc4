"""Pages of one listing come from one snapshot (issue 15, finding 2: signals --json at the bounds)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from daemon.engine.runtime.paged_replies import KEEP_S, MOST, PagedReplies

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# Rows of 100 KB: five to a page of 512 KiB.
ROWS = [{"n": n, "pad": "x" * 100_000} for n in range(12)]


@dataclass
class _Clock:
    now: datetime = T0

    def wall(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.now.timestamp()


class _Listing:
    """A list that changes every time it is computed, as the store does between two pages."""

    def __init__(self) -> None:
        self.computed = 0

    def __call__(self) -> list[dict[str, object]]:
        self.computed += 1
        return [{**row, "computed": self.computed} for row in ROWS]


def _read_all(replies: PagedReplies, listing: _Listing) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    args: dict[str, object] = {"offset": 0, "snapshot": None}
    while True:
        page = replies.page(args, listing)
        rows.extend(page.rows)
        if page.next_offset is None:
            assert page.snapshot is None
            return rows
        args = {"offset": page.next_offset, "snapshot": page.snapshot}


def test_every_page_of_one_reading_comes_from_the_list_computed_for_its_first() -> None:
    replies, listing = PagedReplies(_Clock()), _Listing()
    rows = _read_all(replies, listing)
    assert [row["n"] for row in rows] == list(range(12))
    assert {row["computed"] for row in rows} == {1}
    assert listing.computed == 1
    _read_all(replies, listing)
    assert listing.computed == 2, "a new reading takes a new snapshot"


def test_a_snapshot_left_half_read_is_given_up_after_a_while() -> None:
    clock = _Clock()
    replies, listing = PagedReplies(clock), _Listing()
    first = replies.page({"offset": 0}, listing)
    clock.now += timedelta(seconds=KEEP_S + 1)
    later = replies.page({"offset": first.next_offset, "snapshot": first.snapshot}, listing)
    assert listing.computed == 2, "the old snapshot was gone: the page is of a fresh one"
    assert later.snapshot != first.snapshot


def test_readers_cannot_pile_snapshots_up() -> None:
    replies, listing = PagedReplies(_Clock()), _Listing()
    firsts = [replies.page({"offset": 0}, listing) for _ in range(MOST + 3)]
    oldest, newest = firsts[0], firsts[-1]
    replies.page({"offset": oldest.next_offset, "snapshot": oldest.snapshot}, listing)
    assert listing.computed == MOST + 4, "the oldest snapshot was given up"
    replies.page({"offset": newest.next_offset, "snapshot": newest.snapshot}, listing)
    assert listing.computed == MOST + 4, "the newest is still there"
