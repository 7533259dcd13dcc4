"""A page's shape: its lines with every sample's number cut off, to know a page seen before.

A server's ``/metrics`` page keeps its lines from one scrape to the next; mostly only the
numbers change. Parsing it anew every 2 s (labels, routes, series keys, bounds) was most of the
daemon's CPU with live servers. A parser may remember what it made of a page's shape
(:class:`PageMemo`) and, when the next page has the same shape, read only the numbers. The
shape is exact: every line, stripped, with the sample lines' last field (the number) cut off,
so two pages of one shape differ in their numbers and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

Plan = TypeVar("Plan")


@dataclass(frozen=True, slots=True)
class PageShape:
    """The lines of a page without their numbers, and the numbers of its sample lines."""

    skeleton: str
    numbers: tuple[str, ...]


def page_shape(lines: list[str]) -> PageShape | None:
    """The shape of a page's ``lines``; None when a sample line has no number to cut off.

    Comment lines (``#``) and blank lines are kept whole; a sample line loses what follows
    its last space. The skeleton tells the kinds of lines apart by itself (a sample line's head
    is neither blank nor a comment), so equal skeletons mean the same lines in the same places.
    """
    heads: list[str] = []
    numbers: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            heads.append(line)
            continue
        cut = line.rfind(" ")
        if cut < 0:
            return None
        heads.append(line[:cut])
        numbers.append(line[cut + 1 :])
    return PageShape("\n".join(heads), tuple(numbers))


class PageMemo(Generic[Plan]):
    """What a parser made of the last page shape of one target, to read the next one by."""

    __slots__ = ("_missed", "_plan", "_skeleton", "recalled")

    def __init__(self) -> None:
        self._skeleton: str | None = None
        self._plan: Plan | None = None
        self._missed: str | None = None
        self.recalled = 0  # pages of a known shape, so far

    def recall(self, shape: PageShape) -> Plan | None:
        """The plan kept for ``shape``'s skeleton, or None."""
        if shape.skeleton != self._skeleton:
            return None
        self.recalled += 1
        return self._plan

    def missed(self, shape: PageShape) -> bool:
        """Note a page of ``shape`` read in full; True when the one before had that shape too."""
        again = shape.skeleton == self._missed
        self._missed = shape.skeleton
        return again

    def keep(self, shape: PageShape, plan: Plan) -> None:
        """Remember ``plan`` for pages of ``shape``'s skeleton (the last one kept wins)."""
        self._skeleton, self._plan, self._missed = shape.skeleton, plan, None

    def forget(self) -> None:
        """Keep nothing (the page could not be planned)."""
        self._skeleton, self._plan, self._missed = None, None, None
