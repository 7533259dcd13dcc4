"""Which canonical samples a vLLM page gives, in which order, and how engines are aggregated.

A *layout* is that answer for one page's series, apart from their values: each output sample's
key and the members it is made of (one series as exposed, or an aggregate over engines). It is
generic in the members, so that one function decides it for the two readers of a page: a full
parse lays out the values themselves, and a page memo lays out, once per page shape, the
positions of the numbers on the page (:mod:`daemon.sources.page_shapes`); both are evaluated
by :func:`evaluate`. See :func:`daemon.sources.vllm_metrics.parse_vllm_metrics` for the rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from daemon.sources.samples import SampleColumns, SeriesKey
from daemon.sources.vllm_vocabulary import BY_NAME, Aggregation

Member = TypeVar("Member")
# signal name -> family rank -> series -> (member, key of its aggregate or None)
Gathered = Mapping[str, Mapping[int, Mapping[SeriesKey, tuple[Member, SeriesKey | None]]]]


@dataclass(frozen=True, slots=True)
class Output(Generic[Member]):
    """One canonical sample: a series as exposed (no aggregation) or an aggregate of members."""

    key: SeriesKey
    signal: str
    aggregation: Aggregation | None
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class Layout(Generic[Member]):
    """The outputs of a page, sorted by name and labels, and the families read or passed over."""

    outputs: tuple[Output[Member], ...]
    deprecated: frozenset[str]
    superseded: frozenset[str]
    # The outputs' keys, one tuple for every page of the layout: the store knows it again.
    keys: tuple[SeriesKey, ...]
    # Each output's one member, when every output has one (a server with one engine).
    single_members: tuple[Member, ...] | None = None


def layout(
    gathered: Gathered[Member],
    families: Mapping[tuple[str, int], str],
    incomplete: set[SeriesKey],
    *,
    per_engine: bool,
) -> Layout[Member]:
    """The outputs of ``gathered``: each signal's preferred family present, engines grouped.

    ``incomplete`` aggregates (an engine's value was dropped) give no output, and a series
    exposed without ``engine`` is never replaced by an aggregate; with ``per_engine`` False (a
    single engine), a series labelled ``engine`` gives only its aggregate.
    """
    outputs: list[Output[Member]] = []
    deprecated: set[str] = set()
    superseded: set[str] = set()
    for name, by_rank in gathered.items():
        rank = min(by_rank)
        if rank > 0:
            deprecated.add(families[name, rank])
        superseded.update(families[name, other] for other in by_rank if other != rank)
        explicit: set[SeriesKey] = set()
        groups: dict[SeriesKey, list[Member]] = {}
        for key, (member, aggregate) in by_rank[rank].items():
            if aggregate is None:
                outputs.append(Output(key, name, None, (member,)))
                explicit.add(key)
            else:
                if per_engine:
                    outputs.append(Output(key, name, None, (member,)))
                groups.setdefault(aggregate, []).append(member)
        aggregation = BY_NAME[name].aggregation
        outputs.extend(
            Output(key, name, aggregation, tuple(members))
            for key, members in groups.items()
            if key not in explicit and key not in incomplete
        )
    outputs.sort(key=lambda output: (output.key.name, output.key.labels))
    keys = tuple(output.key for output in outputs)
    single = None
    if all(len(output.members) == 1 for output in outputs):
        single = tuple(output.members[0] for output in outputs)
    return Layout(tuple(outputs), frozenset(deprecated), frozenset(superseded), keys, single)


def evaluate(
    laid_out: Layout[Member],
    value_of: Callable[[Member], float],
    at: float,
    source: str,
    *,
    no_negative_zero: bool = False,
) -> tuple[SampleColumns, set[str]]:
    """The samples of a layout, and the signals whose engines disagreed on a setting.

    The samples come as columns on the layout's own keys (the same tuple at every page of the
    layout) unless a setting disagreed, whose output is then left out. With
    ``no_negative_zero`` (the caller knows no member's value is -0.0), a layout whose outputs
    have one member each takes their values as they are, in one pass: only a -0.0 differs
    between a member's value and the sum or mean of it alone.
    """
    if no_negative_zero and laid_out.single_members is not None:
        as_they_are = list(map(value_of, laid_out.single_members))
        return SampleColumns(laid_out.keys, as_they_are, at, source), set()
    values: list[float] = []
    inconsistent: set[str] = set()
    left_out: list[int] = []
    for index, output in enumerate(laid_out.outputs):
        if output.aggregation is None:
            value: float | None = value_of(output.members[0])
        elif len(output.members) == 1:
            # One engine's value is the instance's, as reduce() gives it (a sum or a mean
            # of -0.0 is 0.0), without a list and a sum for each of a page's outputs.
            value = value_of(output.members[0])
            if output.aggregation is not Aggregation.SAME:
                value += 0.0
        else:
            value = reduce(output.aggregation, [value_of(member) for member in output.members])
        if value is None:
            inconsistent.add(output.signal)
            left_out.append(index)
            continue
        values.append(value)
    keys = laid_out.keys
    if left_out:
        skipped = set(left_out)
        keys = tuple(key for index, key in enumerate(keys) if index not in skipped)
    return SampleColumns(keys, values, at, source), inconsistent


def reduce(aggregation: Aggregation, values: list[float]) -> float | None:
    """One instance-wide value from the engines' values; None when a setting disagrees."""
    if aggregation is Aggregation.SUM:
        return math.fsum(values)
    if aggregation is Aggregation.MEAN:
        return math.fsum(values) / len(values)
    return values[0] if all(value == values[0] for value in values) else None
