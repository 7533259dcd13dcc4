"""Turn the text of a vLLM ``/metrics`` page into canonical samples.

The text is read as prometheus-client's own (maintained) text parser reads it
(:mod:`daemon.sources.metric_text` reads plain pages the same way, faster); this module only
maps what it yields onto :mod:`daemon.sources.vllm_vocabulary`. Mapping works on *sample* names,
not family names, because the parser's families are not stable across exposition styles: it
strips ``_total`` from counter families, and a page negotiated as OpenMetrics keeps
``# TYPE vllm:x`` while its samples read ``vllm_x``, so those samples arrive as untyped
singletons.

What the mapping honours:

* ``vllm:`` and ``vllm_`` prefixes give the same canonical samples.
* Renamed families: of the families a signal lists, only the most preferred one present on
  the page is read, so a deprecated family shown beside its replacement is not counted twice.
* ``_created`` series, timestamps and families outside the vocabulary are ignored; vLLM
  families the vocabulary does not know are reported in ``unknown_families``.
* Values that are NaN or infinite, and buckets whose ``le`` is not a number, are dropped and
  counted: an unknown value must never pass for a measured one.
* Data parallel: see :func:`parse_vllm_metrics`.

A page beyond its target's :class:`~daemon.sources.metric_pages.PageLimits` (too many
samples, a label with too many distinct values) is refused too, and a page within them is
parsed in slices (:func:`parse_vllm_metrics_gently`), so a huge page never holds the event
loop for long.

A page the parser rejects fails as a whole, as a Prometheus scrape does: half a page read as
if it were the whole would make absent series look like zeros. A page that shows one series
twice (same name, same labels) is rejected too, as Prometheus rejects it ("duplicate sample
for timestamp"): which of the two values is true cannot be known, and taking the last one
would let a broken exporter (or two behind one address) drive the governor.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from daemon.core.errors import MetricsParseError
from daemon.sources.metric_pages import PageLimits, check_labels, check_sample_count, page_slices
from daemon.sources.metric_text import ParsedSample, page_samples, plain_samples, plain_values
from daemon.sources.page_shapes import PageMemo, PageShape, page_shape
from daemon.sources.samples import Labels, Sample, SampleColumns, SeriesKey
from daemon.sources.vllm_layout import Layout, evaluate, layout
from daemon.sources.vllm_vocabulary import (
    KNOWN_UNUSED_FAMILIES,
    SIGNALS,
    Kind,
    Signal,
)

PREFIXES = ("vllm:", "vllm_")
_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
# Suffixes stripped from an unknown sample name to name its family in diagnostics.
_SERIES_SUFFIXES = ("_bucket", "_count", "_sum", "_total")


@dataclass(frozen=True, slots=True)
class VllmScrape:
    """What one ``/metrics`` page said, in canonical form, with what was odd about it.

    Attributes:
        columns: Canonical samples sorted by name and labels, as columns (keys and values;
            :attr:`samples` as samples): on a data-parallel server per engine (label
            ``engine``) and aggregated (no ``engine``); on a server with one engine, the
            aggregate alone (the same values, stored once).
        engines: Values of the ``engine`` label seen, sorted; empty on older servers.
        unknown_families: vLLM families (``vllm:name``) neither mapped nor known to be unused;
            usually a rename the vocabulary has not caught up with.
        deprecated_families: Deprecated families read because their replacement was absent.
        superseded_families: Deprecated families ignored because their replacement was there.
        inconsistent_signals: Settings (aggregation ``same``) on which engines disagreed, so
            no aggregate sample was produced for them.
        dropped_samples: Samples of known families dropped: NaN or infinite value, or a bucket
            bound ``le`` that is not a number.
        underscore_prefix: The page spelled ``vllm:`` as ``vllm_`` (an OpenMetrics answer).
    """

    columns: SampleColumns
    engines: tuple[str, ...] = ()
    unknown_families: frozenset[str] = frozenset()
    deprecated_families: frozenset[str] = frozenset()
    superseded_families: frozenset[str] = frozenset()
    inconsistent_signals: frozenset[str] = frozenset()
    dropped_samples: int = 0
    underscore_prefix: bool = False

    @property
    def samples(self) -> tuple[Sample, ...]:
        """The canonical samples, one object each (the store takes :attr:`columns`)."""
        return self.columns.samples()

    @property
    def version_hints(self) -> tuple[str, ...]:
        """Sentences for the log about what the page says of the server's vLLM version."""
        hints = []
        if self.engines:
            hints.append(f"{len(self.engines)} engine(s) labelled 'engine': vLLM V1 metrics")
        else:
            hints.append("no 'engine' label: an older vLLM (V0 metrics)")
        hints.extend(
            f"deprecated family {name} read: its replacement is absent (older vLLM)"
            for name in sorted(self.deprecated_families)
        )
        hints.extend(
            f"deprecated family {name} ignored: its replacement is on the page"
            for name in sorted(self.superseded_families)
        )
        if self.unknown_families:
            names = ", ".join(sorted(self.unknown_families))
            hints.append(f"families the governor does not know (a newer vLLM?): {names}")
        if self.underscore_prefix:
            hints.append(
                "names use 'vllm_' instead of 'vllm:': the server answered in OpenMetrics;"
                " scrape without an Accept header"
            )
        return tuple(hints)


@dataclass(frozen=True, slots=True)
class _Route:
    """Where samples of one exposed sample name go."""

    signal: Signal
    series: str  # canonical sample name: the signal's name plus any histogram suffix
    family: str  # the vLLM family, with the ``vllm:`` prefix, for diagnostics
    rank: int  # position of the family in ``signal.families``; 0 is preferred


def _routes() -> dict[str, tuple[_Route, ...]]:
    """Every exposed sample name the vocabulary maps, under both prefixes."""
    routes: dict[str, list[_Route]] = {}
    for signal in SIGNALS:
        for rank, family in enumerate(signal.families):
            if signal.kind is Kind.HISTOGRAM:
                exposed = [
                    (family + suffix, signal.name + suffix) for suffix in _HISTOGRAM_SUFFIXES
                ]
            elif signal.kind is Kind.COUNTER:
                exposed = [(family + "_total", signal.name)]
            else:
                exposed = [(family, signal.name)]
            for name, series in exposed:
                route = _Route(signal, series, "vllm:" + family, rank)
                for prefix in PREFIXES:
                    routes.setdefault(prefix + name, []).append(route)
    return {name: tuple(found) for name, found in routes.items()}


_ROUTES = _routes()


def _canonical_le(text: str) -> str | None:
    """A bucket bound in one spelling ("1" and "1.0" are one bucket), or None if unusable."""
    try:
        bound = float(text)
    except ValueError:
        return None
    if math.isnan(bound) or bound == -math.inf:
        return None
    return "+Inf" if bound == math.inf else repr(bound)


def _info_value(labels: dict[str, str], label: str) -> float | None:
    """The number an info family holds in ``label``; vLLM writes "None" before profiling."""
    try:
        value = float(labels[label])
    except (KeyError, ValueError):
        return None
    return value if math.isfinite(value) else None


_Keys = tuple[SeriesKey, SeriesKey | None]
# The labels an info family's series keeps: the rest are the settings it reports.
_INFO_IDENTITY = ("engine", "model_name")


@lru_cache(maxsize=4096)
def _series_keys(series: str, label_items: Labels, instance: str, info: bool) -> _Keys | None:
    """The key of a sample and, when it belongs to one engine, the key of its aggregate.

    None when its bucket bound ``le`` is not a number. Cached because a server exposes the
    same series at every scrape, and building sorted label tuples is most of this module's
    cost; 4096 entries hold several data-parallel servers' worth of series.
    """
    kept = dict(label_items)
    if info:
        # An info family's other labels are the settings themselves; keep only identity.
        kept = {key: kept[key] for key in _INFO_IDENTITY if key in kept}
    elif "le" in kept:
        bound = _canonical_le(kept["le"])
        if bound is None:
            return None
        kept["le"] = bound
    kept["instance"] = instance
    labels = tuple(sorted(kept.items()))
    if "engine" not in kept:
        return SeriesKey(series, labels), None
    without_engine = tuple(pair for pair in labels if pair[0] != "engine")
    return SeriesKey(series, labels), SeriesKey(series, without_engine)


@dataclass(frozen=True, slots=True)
class _Placement:
    """Where a sample's value goes: one series of a signal's family, and that series' aggregate."""

    signal: str
    rank: int
    key: SeriesKey
    aggregate: SeriesKey | None
    family: str
    fixed: float | None  # an info family's value, read from a label: the number is not it


@dataclass
class _Gathered:
    """Mutable scratch state of one parse; never leaves this module."""

    instance: str
    limits: PageLimits = field(default_factory=PageLimits)
    # label name -> distinct values among the samples read, against limits.max_label_values
    label_values: dict[str, set[str]] = field(default_factory=dict)
    # signal name -> family rank -> series -> (value, key of its aggregate or None)
    values: dict[str, dict[int, dict[SeriesKey, tuple[float, SeriesKey | None]]]] = field(
        default_factory=dict
    )
    families: dict[tuple[str, int], str] = field(default_factory=dict)
    engines: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    # Aggregates missing an engine's value: a sum over the rest would pass for the whole server.
    incomplete: set[SeriesKey] = field(default_factory=set)
    saw_vllm: bool = False
    underscore: bool = False
    dropped: int = 0  # values that are NaN or infinite
    unplaceable: int = 0  # samples whose labels make no series (a bucket bound not a number)

    def add(self, name: str, labels: dict[str, str], value: float) -> tuple[_Placement, ...]:
        """Route one parsed sample; returns where its value went (for a page memo)."""
        placements = self.placements(name, labels)
        for placement in placements:
            if not self.place(placement, value):
                shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                message = (
                    f"duplicate series on the page of {self.instance}: {name}{{{shown}}} appears"
                    " more than once; the page is refused (which value is true cannot be known)"
                )
                raise MetricsParseError(message, detail="duplicate-series")
        return placements

    def placements(self, name: str, labels: dict[str, str]) -> tuple[_Placement, ...]:
        """Where a sample of this name and these labels goes, whatever its value."""
        if not name.startswith(PREFIXES):
            return ()
        self.saw_vllm = True
        routes = _ROUTES.get(name)
        if routes is None:
            self._note_unknown(name)
            return ()
        if name.startswith("vllm_"):
            self.underscore = True
        if routes[0].signal.kind is Kind.INFO:
            # An info family's labels are settings, not identity: only its identity is kept.
            identity = {key: labels[key] for key in _INFO_IDENTITY if key in labels}
            check_labels(identity, self.label_values, self.limits, self.instance, name)
        else:
            check_labels(labels, self.label_values, self.limits, self.instance, name)
        engine = labels.get("engine")
        if engine is not None:
            self.engines.add(engine)
        found = (self._placement(route, labels) for route in routes)
        return tuple(placement for placement in found if placement is not None)

    def _placement(self, route: _Route, labels: dict[str, str]) -> _Placement | None:
        signal = route.signal
        info = signal.kind is Kind.INFO
        fixed = None
        if info:
            fixed = _info_value(labels, signal.info_label)
            if fixed is None:
                return None
        keys = _series_keys(route.series, tuple(labels.items()), self.instance, info)
        if keys is None:
            self.unplaceable += 1
            return None
        return _Placement(signal.name, route.rank, keys[0], keys[1], route.family, fixed)

    def place(self, placement: _Placement, value: float) -> bool:
        """Put ``value`` (an info family's: its label's) in its series; False if already set."""
        if placement.fixed is not None:
            value = placement.fixed
        if not math.isfinite(value):
            self.dropped += 1
            if placement.aggregate is not None:
                self.incomplete.add(placement.aggregate)
            return True
        series = self.values.setdefault(placement.signal, {}).setdefault(placement.rank, {})
        if placement.key in series:
            return False
        series[placement.key] = (value, placement.aggregate)
        self.families[placement.signal, placement.rank] = placement.family
        return True

    def _note_unknown(self, name: str) -> None:
        if name.endswith("_created"):
            return  # creation times of counters and histograms: nothing to govern
        family = name[len("vllm:") :]
        for suffix in _SERIES_SUFFIXES:
            if family.endswith(suffix):
                family = family[: -len(suffix)]
                break
        if family not in KNOWN_UNUSED_FAMILIES and family + "_total" not in KNOWN_UNUSED_FAMILIES:
            self.unknown.add("vllm:" + family)


def _samples(text: str) -> Iterator[ParsedSample]:
    """The parser's samples, one at a time, with only the parser's own errors translated.

    The ``try`` wraps nothing but the parser's step, so a bug in the mapping surfaces as the
    bug it is instead of passing for a malformed page.
    """
    samples = page_samples(text)
    while True:
        try:
            sample = next(samples, None)
        # The parser is lax and documents no failure modes; fuzzing only ever saw ValueError,
        # the others are translated too so that no library error escapes to the runner.
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            reason = str(exc)[:200] or type(exc).__name__
            message = f"not a Prometheus text page: {reason}"
            raise MetricsParseError(message, detail="unparsable") from exc
        if sample is None:
            return
        yield sample


def parse_vllm_metrics(
    text: str,
    *,
    instance: str,
    at: float,
    source: str,
    limits: PageLimits | None = None,
    memo: PageMemo[VllmPagePlan] | None = None,
) -> VllmScrape:
    """Parse a vLLM ``/metrics`` page into canonical samples, in one go.

    Every sample gets the label ``instance=<instance>`` and keeps vLLM's labels. On a
    data-parallel server (series labelled ``engine``) each series yields its per-engine sample
    and, grouped by the other labels, one aggregate without ``engine``: the sum for counters,
    histogram buckets, ``_count``/``_sum`` and gauges of counts; the mean for the KV usage
    ratio; the common value for settings (none if engines disagree). Summing counters before
    taking rates is safe here because the engines of one server restart together, so a reset
    of one is a reset of all. A series that vLLM itself exposes without ``engine`` is taken as
    it is and never overwritten by an aggregate. A server with a single engine (``engine="0"``
    on every series, as vLLM V1 labels even one engine) yields the aggregates alone: its
    per-engine series would repeat them value for value, and holding both doubled what the
    store keeps and every scrape's work.

    Args:
        text: The page as text.
        instance: Name of the configured vLLM instance (label ``instance``).
        at: Loop-clock time of the scrape, stamped on every sample.
        source: Name of the source (``vllm/main``), stamped on every sample.
        limits: What the page may hold (default: :class:`PageLimits`' defaults).
        memo: What the target's pages of the last shape yielded: a page of that shape
            (:mod:`daemon.sources.page_shapes`) is read by its numbers alone, with the same
            result; the memo learns a shape that two pages in a row had.

    Returns:
        The canonical samples and diagnostics about the page.

    Raises:
        MetricsParseError: The text is not a Prometheus text page, holds no ``vllm:``
            metrics at all, shows one series twice, or is beyond ``limits``.
    """
    steps = _parse_in_steps(text, instance, at, source, limits or PageLimits(), memo=memo)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            scrape: VllmScrape = done.value
            return scrape


async def parse_vllm_metrics_gently(
    text: str,
    *,
    instance: str,
    at: float,
    source: str,
    limits: PageLimits,
    memo: PageMemo[VllmPagePlan] | None = None,
) -> VllmScrape:
    """:func:`parse_vllm_metrics`, a slice of the page at a time, yielding the loop in between.

    The result is the same; a slice costs a few milliseconds, so other tasks (other targets'
    scrapes, the control socket, the watchdog) never wait long. Cancelling it (the poll's
    deadline) stops the parse at the next slice.
    """
    steps = _parse_in_steps(text, instance, at, source, limits, memo=memo)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            scrape: VllmScrape = done.value
            return scrape
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class VllmPagePlan:
    """What a page of one shape yields whatever its numbers: where each sample line's goes."""

    instance: str
    placements: tuple[tuple[_Placement, ...], ...]  # one entry per sample line, in page order
    engines: frozenset[str]
    unknown: frozenset[str]
    underscore: bool
    unplaceable: int
    # Each output's members as positions among the page's numbers (an info family's value,
    # read from its label, among the constants after them); None when the page it was learned
    # from had a value that was not finite, which changes the outputs.
    layout: Layout[int] | None = None
    constants: tuple[float, ...] = ()
    no_negative_constant: bool = False  # no constant is -0.0 (or negative)


def _parse_in_steps(
    text: str,
    instance: str,
    at: float,
    source: str,
    limits: PageLimits,
    *,
    memo: PageMemo[VllmPagePlan] | None = None,
) -> Generator[None, None, VllmScrape]:
    """The parse as a generator that pauses after each slice of the page."""
    check_sample_count(text, limits, instance)
    shape = page_shape(text.split("\n")) if memo is not None else None
    if memo is not None and shape is not None:
        plan = memo.recall(shape)
        known = _read_by_plan(plan, shape, instance, limits, at, source) if plan else None
        if known is not None:
            return known
    gathered = _Gathered(instance, limits)
    fed: list[tuple[str, dict[str, str], tuple[_Placement, ...]]] = []
    for piece in page_slices(text):
        for name, labels, value in _samples(piece):
            placements = gathered.add(name, labels, value)
            if memo is not None:
                fed.append((name, labels, placements))
        yield
    if not gathered.saw_vllm:
        message = (
            f"no vllm:* metrics on the page of {instance}: is --disable-log-stats set,"
            " or is this not a vLLM server?"
        )
        raise MetricsParseError(message, detail="no-vllm-metrics")
    if memo is not None:
        _learn(memo, shape, text, fed, gathered)
    return _canonical(gathered, at, source)


def _read_by_plan(  # noqa: PLR0917 - the parse's own arguments, and the plan
    plan: VllmPagePlan,
    shape: PageShape,
    instance: str,
    limits: PageLimits,
    at: float,
    source: str,
) -> VllmScrape | None:
    """The page read from its numbers by ``plan``; None when a number is not plain.

    A number that is not plain (``1_000``, a long one) would send the page to
    prometheus_client, whose reading may differ, so the page is parsed in full instead. When
    every value is finite (the usual page), the plan's layout gives the samples directly;
    otherwise the values are placed as a full parse places them, and laid out anew.
    """
    if plan.instance != instance or len(plan.placements) != len(shape.numbers):
        return None
    values = plain_values(shape.numbers)
    if values is None:
        return None
    if plan.layout is not None and _all_finite(values):
        values.extend(plan.constants)
        # Only a number written with a minus (or a label's, among the constants) is -0.0.
        no_negative_zero = plan.no_negative_constant and "\n-" not in "\n" + "\n".join(
            shape.numbers
        )
        columns, inconsistent = evaluate(
            plan.layout, values.__getitem__, at, source, no_negative_zero=no_negative_zero
        )
        return VllmScrape(
            columns=columns,
            engines=tuple(sorted(plan.engines)),
            unknown_families=plan.unknown,
            deprecated_families=plan.layout.deprecated,
            superseded_families=plan.layout.superseded,
            inconsistent_signals=frozenset(inconsistent),
            dropped_samples=plan.unplaceable,
            underscore_prefix=plan.underscore,
        )
    gathered = _Gathered(
        instance,
        limits,
        engines=set(plan.engines),
        unknown=set(plan.unknown),
        saw_vllm=True,
        underscore=plan.underscore,
        unplaceable=plan.unplaceable,
    )
    for value, placements in zip(values, plan.placements, strict=True):
        for placement in placements:
            if not gathered.place(placement, value):
                return None  # cannot happen (the shape was read without duplicates)
    return _canonical(gathered, at, source)


def _all_finite(values: list[float]) -> bool:
    # A NaN or an infinity makes the sum so; a sum of finite values may overflow, rarely.
    return math.isfinite(sum(values)) or all(map(math.isfinite, values))


def _learn(
    memo: PageMemo[VllmPagePlan],
    shape: PageShape | None,
    text: str,
    fed: list[tuple[str, dict[str, str], tuple[_Placement, ...]]],
    gathered: _Gathered,
) -> None:
    """Keep the plan of a page read in full, when its samples follow its lines one for one.

    Only a shape that two pages in a row had is planned: a page whose shape changes at every
    scrape then costs the shape, not a second reading of its text as well. The plan is kept
    only if the whole text reads as plain lines giving the very samples the parse was fed, in
    order: then a page of the same shape and plain numbers gives those samples with its own
    numbers, and nothing else.
    """
    if shape is None or len(shape.numbers) != len(fed):
        memo.forget()
        return
    if not memo.missed(shape):
        return  # the shape is new: planned if the next page has it too
    plain = plain_samples(text)
    if (
        plain is None
        or len(plain) != len(fed)
        or any(
            (name, labels) != (fed_name, fed_labels)
            for (name, labels, _), (fed_name, fed_labels, _) in zip(plain, fed, strict=True)
        )
    ):
        memo.forget()
        return
    placements = tuple(placements for _, _, placements in fed)
    positions, constants = _positions(placements)
    laid_out = None
    if gathered.dropped == 0:
        per_engine = len(gathered.engines) > 1
        laid_out = layout(positions, gathered.families, set(), per_engine=per_engine)
    plan = VllmPagePlan(
        instance=gathered.instance,
        placements=placements,
        engines=frozenset(gathered.engines),
        unknown=frozenset(gathered.unknown),
        underscore=gathered.underscore,
        unplaceable=gathered.unplaceable,
        layout=laid_out,
        constants=tuple(constants),
        no_negative_constant=all(math.copysign(1.0, constant) > 0 for constant in constants),
    )
    memo.keep(shape, plan)


def _positions(
    placements: tuple[tuple[_Placement, ...], ...],
) -> tuple[dict[str, dict[int, dict[SeriesKey, tuple[int, SeriesKey | None]]]], list[float]]:
    """Each series' position among a page's numbers, gathered as a parse gathers values.

    An info family's value comes from its label, not its number: it is put among constants
    that follow the numbers, and its position is there.
    """
    positions: dict[str, dict[int, dict[SeriesKey, tuple[int, SeriesKey | None]]]] = {}
    constants: list[float] = []
    for line, line_placements in enumerate(placements):
        for placement in line_placements:
            position = line
            if placement.fixed is not None:
                position = len(placements) + len(constants)
                constants.append(placement.fixed)
            by_rank = positions.setdefault(placement.signal, {})
            by_rank.setdefault(placement.rank, {})[placement.key] = (position, placement.aggregate)
    return positions, constants


def _canonical(gathered: _Gathered, at: float, source: str) -> VllmScrape:
    laid_out = layout(
        gathered.values,
        gathered.families,
        gathered.incomplete,
        per_engine=len(gathered.engines) > 1,
    )
    columns, inconsistent = evaluate(laid_out, float, at, source)
    return VllmScrape(
        columns=columns,
        engines=tuple(sorted(gathered.engines)),
        unknown_families=frozenset(gathered.unknown),
        deprecated_families=laid_out.deprecated,
        superseded_families=laid_out.superseded,
        inconsistent_signals=frozenset(inconsistent),
        dropped_samples=gathered.dropped + gathered.unplaceable,
        underscore_prefix=gathered.underscore,
    )
