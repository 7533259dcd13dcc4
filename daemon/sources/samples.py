"""What sources produce: timestamped samples of named, labelled series.

A sample knows which source observed it and when (on the loop's monotonic clock), so its age
is always known and stale data can never pass for fresh. Histograms travel as one sample per
cumulative bucket (label ``le``) plus ``_count`` and ``_sum`` series, as Prometheus exposes
them; windowed quantiles are derived from bucket deltas in the signal store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]


def labels_of(mapping: Mapping[str, str]) -> Labels:
    """Labels in their canonical form: sorted ``(name, value)`` pairs."""
    return tuple(sorted(mapping.items()))


@dataclass(frozen=True, slots=True)
class SeriesKey:
    """One series: a canonical signal name and its labels.

    Attributes:
        name: Canonical, version-independent signal name (``vllm_num_requests_running``).
        labels: Sorted label pairs; ``instance`` names the configured target.
    """

    name: str
    labels: Labels = ()
    # Hashed once: every scrape looks each of its keys up in the store's dicts, and every view
    # in its own (some 4,000 keys with sixteen servers), and hashing the label tuples anew at
    # each lookup was about 5% of the daemon's CPU.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.name, self.labels)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[SeriesKey], tuple[str, Labels]]:
        """Rebuilt from its name and labels: another process hashes strings otherwise."""
        return SeriesKey, (self.name, self.labels)

    def label(self, name: str) -> str | None:
        """The value of label ``name``, or None."""
        for key, value in self.labels:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Sample:
    """One observed value of one series.

    Attributes:
        key: The series.
        value: The observed value (counters are cumulative, as exposed).
        at: Loop-clock time of the observation, in seconds.
        source: Name of the source that observed it (``vllm/main``, ``nvml``, ``mqtt``).
    """

    key: SeriesKey
    value: float
    at: float
    source: str

    def age(self, now: float) -> float:
        """Seconds since the observation, on the same clock as ``at``."""
        return now - self.at


@dataclass(frozen=True, slots=True)
class SampleColumns:
    """Samples of one source at one time, as columns: the keys, and a value for each.

    A page read by its plan (:mod:`daemon.sources.page_shapes`) gives the very same keys, one
    tuple, at every scrape: the store finds their series once and then appends the values
    alone, and no :class:`Sample` is made for each of them (some 4,000 every 2 s with sixteen
    servers).

    Attributes:
        keys: The series, one per value.
        values: Their values, in the same order.
        at: Loop-clock time of the observation, in seconds.
        source: Name of the source that observed them.
    """

    keys: tuple[SeriesKey, ...]
    values: Sequence[float]
    at: float
    source: str

    def samples(self) -> tuple[Sample, ...]:
        """The columns as samples, in their order."""
        at, source = self.at, self.source
        return tuple(
            Sample(key, value, at, source)
            for key, value in zip(self.keys, self.values, strict=True)
        )
