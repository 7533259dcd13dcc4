"""What the governor sees, as rows: one per signal, target and label set, with its state.

This is the shape of ``vllm-governor signals --json`` and what the policy engine reads:
``{"name", "target", "labels", "value", "source", "age_s", "state", "reason"}``, where
``state`` is ``ok`` (a value fresh enough to act on), ``stale`` (data exists but is older than
its source's limit; the value is withheld), ``no_data`` (nothing yet, or not enough to cover
the window) or ``implausible`` (fresh, but outside the signal's domain, or a rate of a counter
that fell without resetting: :mod:`daemon.sources.domains`; the value is withheld and
``reason`` names it and the domain). ``reason`` is "" in the other states.

vLLM signals use the short names of :mod:`daemon.sources.catalogue` and the instance name as
``target``; a data-parallel server has one row for the whole server (no ``engine`` label) and
one per engine, a server with one engine only the row for the whole server. Other sources'
series (``gpu_*``, ``host_*``, MQTT, Prometheus) keep their own names, with no target; a
configured signal (a Prometheus query, an MQTT subscription) that has no series yet has one
``no_data`` row naming its source, so that it shows before its first value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from daemon.sources.catalogue import CATALOGUE, CatalogueEntry
from daemon.sources.declarations import SignalDeclaration, unit_of
from daemon.sources.derived import (
    DERIVED_SIGNALS,
    BucketMemo,
    DerivedValue,
    HistogramMemo,
    derive,
)
from daemon.sources.domains import Domain, unit_domain
from daemon.sources.registry import BUILTIN
from daemon.sources.samples import Labels, SeriesKey
from daemon.sources.store import Freshness, Reading, SignalStore

OK, STALE, NO_DATA, IMPLAUSIBLE = "ok", "stale", "no_data", "implausible"


@dataclass(frozen=True, slots=True)
class SignalRow:
    """One signal as the governor sees it now."""

    name: str
    target: str | None
    labels: dict[str, str]
    value: float | None
    source: str | None
    age_s: float | None
    state: str
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        """The row as the JSON contract spells it."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ViewContext:
    """What the view needs besides the store."""

    now: float
    window_s: float
    stale_after: Callable[[SeriesKey], float]
    targets: tuple[str, ...]
    # Shared signals that get a no_data row while they have no series at all.
    declared: tuple[SignalDeclaration, ...] = ()
    # Only these catalogue signals (None: every signal). A fast loop reading five signals
    # twice a second must not pay for every quantile of every histogram.
    only: frozenset[str] | None = None
    # With ``only``: the other sources' series and the declared signals' rows as well (they
    # cost a reading each, where a catalogue quantile costs a window of every bucket).
    others_too: bool = False


@dataclass(slots=True)
class _Computed:
    """What one view computes once and reads many times."""

    # Each derived signal for every target at once, by instance and sorted by labels: each
    # target's rows (and each entry that shares it: errors_per_s and aborts_per_s) take their
    # own, rather than sorting and looking through every target's.
    derived: dict[str, dict[str | None, list[tuple[Labels, DerivedValue]]]] = field(
        default_factory=dict
    )
    # Each histogram's bucket increases, for its p50, p95 and p99.
    buckets: BucketMemo = field(default_factory=dict)
    # Each histogram's bucket series, with the time of their newest point.
    histograms: HistogramMemo = field(default_factory=dict)
    # Each series name's keys by instance, in the store's order: finding a row's base series
    # among its own server's keys, not every server's, keeps a view linear in the servers.
    keys: dict[str, dict[str | None, list[SeriesKey]]] = field(default_factory=dict)

    def keys_of(self, store: SignalStore, name: str, instance: str) -> list[SeriesKey]:
        """``store.keys(name, instance=instance)``."""
        by_instance = self.keys.get(name)
        if by_instance is None:
            by_instance = {}
            for key in store.keys(name):
                by_instance.setdefault(key.label("instance"), []).append(key)
            self.keys[name] = by_instance
        return by_instance.get(instance, [])

    def first_key(self, store: SignalStore, name: str, pairs: dict[str, str]) -> SeriesKey | None:
        """``store.keys(name, **pairs)[0]``, or None when there is none."""
        if "instance" in pairs:
            candidates = self.keys_of(store, name, pairs["instance"])
        else:
            candidates = store.keys(name)
        wanted = set(pairs.items())
        return next((key for key in candidates if wanted <= set(key.labels)), None)


def signal_rows(store: SignalStore, context: ViewContext) -> list[SignalRow]:
    """Every catalogue signal of every target, then every other source's series.

    With ``context.only``, the catalogue signals named there and nothing else, or with
    ``context.others_too`` those and every other source's series.
    """
    rows: list[SignalRow] = []
    computed = _Computed()
    if context.only is not None:
        for name in sorted(context.only):
            if name in CATALOGUE:
                rows.extend(_catalogue_rows(store, CATALOGUE[name], context, computed))
        if not context.others_too:
            return rows
    else:
        for entry in CATALOGUE.values():
            rows.extend(_catalogue_rows(store, entry, context, computed))
    rows.extend(_other_rows(store, context))
    seen = set(store.names())
    for declaration in context.declared:
        if declaration.name not in seen:
            rows.append(
                SignalRow(declaration.name, None, {}, None, declaration.source, None, NO_DATA)
            )
    return rows


def _catalogue_rows(
    store: SignalStore,
    entry: CatalogueEntry,
    context: ViewContext,
    computed: _Computed,
) -> Iterable[SignalRow]:
    for target in context.targets:
        found = False
        rows = (
            _gauge_rows(store, entry, target, context, computed)
            if entry.series
            else _derived_rows(store, entry, target, context, computed)
        )
        for row in rows:
            found = True
            yield row
        if not found:
            yield SignalRow(entry.name, target, {}, None, None, None, NO_DATA)


def _gauge_rows(
    store: SignalStore,
    entry: CatalogueEntry,
    target: str,
    context: ViewContext,
    computed: _Computed,
) -> Iterable[SignalRow]:
    assert entry.series is not None
    for key in computed.keys_of(store, entry.series, target):
        reading = store.reading(key, context.now, context.stale_after(key))
        value, state, reason = _judged(reading, entry.domain)
        yield SignalRow(
            entry.name,
            target,
            _shown_labels(key.labels),
            value,
            store.source_of(key),
            _rounded(reading.age_s),
            state,
            reason,
        )


def _derived_rows(
    store: SignalStore,
    entry: CatalogueEntry,
    target: str,
    context: ViewContext,
    computed: _Computed,
) -> Iterable[SignalRow]:
    assert entry.derived is not None
    derived = DERIVED_SIGNALS[entry.derived]
    by_instance = computed.derived.get(entry.derived)
    if by_instance is None:
        values = derive(
            store,
            derived,
            context.now,
            context.window_s,
            context.stale_after,
            memo=computed.buckets,
            histograms=computed.histograms,
        )
        by_instance = {}
        for labels, result in sorted(values.items()):
            by_instance.setdefault(dict(labels).get("instance"), []).append((labels, result))
        computed.derived[entry.derived] = by_instance
    for labels, result in by_instance.get(target, []):
        pairs = dict(labels)
        if any(pairs.get(k) != v for k, v in entry.only):
            continue
        base = computed.first_key(store, derived.base, pairs) or computed.first_key(
            store, derived.base + "_bucket", pairs
        )
        age = None if result.newest_at is None else context.now - result.newest_at
        stale = base is not None and age is not None and age > context.stale_after(base)
        state = OK if result.value is not None else STALE if stale else NO_DATA
        value, reason = result.value, result.implausible
        if not reason and value is not None:
            reason = entry.domain.problem(value) or ""
        if reason:
            value, state = None, IMPLAUSIBLE
        shown = {k: v for k, v in _shown_labels(labels).items() if k not in dict(entry.only)}
        source = store.source_of(base) if base is not None else None
        yield SignalRow(entry.name, target, shown, value, source, _rounded(age), state, reason)


def _other_rows(store: SignalStore, context: ViewContext) -> Iterable[SignalRow]:
    for name in sorted(store.names()):
        if name.startswith("vllm_"):
            continue  # shown through the catalogue
        domain = _domain_of(name, context)
        for key in store.keys(name):
            reading = store.reading(key, context.now, context.stale_after(key))
            value, state, reason = _judged(reading, domain)
            yield SignalRow(
                name,
                None,
                dict(key.labels),
                value,
                store.source_of(key),
                _rounded(reading.age_s),
                state,
                reason,
            )


def _judged(reading: Reading, domain: Domain) -> tuple[float | None, str, str]:
    """The value shown, the state and the reason of a reading of a signal of ``domain``."""
    if reading.freshness is Freshness.MISSING:
        return None, NO_DATA, ""
    if reading.freshness is Freshness.STALE or reading.value is None:
        return None, STALE, ""
    problem = domain.problem(reading.value)
    if problem is not None:
        return None, IMPLAUSIBLE, problem
    return reading.value, OK, ""


def _domain_of(name: str, context: ViewContext) -> Domain:
    """The declared domain of a signal that is not the catalogue's, else its name's unit's."""
    for declaration in context.declared:
        if declaration.name == name:
            return declaration.domain
    declared = BUILTIN.get(name)
    return declared.domain if declared is not None else unit_domain(unit_of(name))


def _shown_labels(labels: Labels) -> dict[str, str]:
    """Labels minus ``instance``, which the row's target already says."""
    return {key: value for key, value in labels if key != "instance"}


def _rounded(age: float | None) -> float | None:
    return None if age is None else round(age, 3)
