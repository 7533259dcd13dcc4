"""A paged answer's rows, kept from its first page to its last, so every page shows one moment.

The control socket answers a long list (every signal of a store at its bounds) a page at a
time (:func:`daemon.core.control_protocol.page_of`). Computed afresh for each page, the list
would change under the reader: a series stored or forgotten between two pages would be shown
twice or missed, and ten thousand rows would be computed once per page. So the first page takes
a snapshot, named by a token that the next request sends back; the last page lets it go, and
so does :data:`KEEP_S` without a request (a reader that stopped half-way). At most
:data:`MOST` snapshots are kept, the oldest given up first, so readers cannot pile them up.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daemon.core.clock import Clock
from daemon.core.control_protocol import offset_of, page_of

KEEP_S = 30.0
MOST = 4


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list, where the next one starts, and the snapshot to ask it of."""

    rows: list[Any]
    next_offset: int | None
    snapshot: str | None


@dataclass(frozen=True, slots=True)
class _Snapshot:
    rows: list[Any]
    taken_at: float


class PagedReplies:
    """Snapshots of the lists being read a page at a time."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()

    def page(self, args: dict[str, Any], compute: Callable[[], list[Any]]) -> Page:
        """The page ``args`` asks for (``offset``, ``snapshot``) of the list ``compute`` makes.

        A request without a snapshot, or whose snapshot is gone, gets a fresh one.

        Raises:
            ControlError: ``offset`` is not a whole number of at least 0.
        """
        offset = offset_of(args)
        now = self._clock.monotonic()
        for old in [t for t, kept in self._snapshots.items() if now - kept.taken_at > KEEP_S]:
            del self._snapshots[old]
        asked = args.get("snapshot")
        kept = self._snapshots.get(asked) if isinstance(asked, str) else None
        token = asked if kept is not None and isinstance(asked, str) else uuid.uuid4().hex
        if kept is None:
            kept = _Snapshot(compute(), now)
        rows, next_offset = page_of(kept.rows, offset)
        if next_offset is None:
            self._snapshots.pop(token, None)
            return Page(rows, None, None)
        self._snapshots[token] = kept
        self._snapshots.move_to_end(token)
        while len(self._snapshots) > MOST:
            self._snapshots.popitem(last=False)
        return Page(rows, next_offset, token)
