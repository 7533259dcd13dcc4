"""Plausibility: the values a signal can take, and what to call a value outside them.

Every signal a policy may read has a *domain*: a count is a whole number of things, so never
negative; a ratio lies within [0, 1]; a rate of a counter or a latency is never negative; any
other signal is at least a finite number. A value outside its signal's domain is not a
measurement to act on but a broken exporter (a sign flipped, a percentage where a ratio was
promised, an overflowing gauge): the row showing it is ``implausible``, names the value and
the domain, and a policy sees no value at all, as with missing data.

Counters have one more rule, applied where their rates are computed
(:mod:`daemon.sources.derivations`): they only rise, and a drop is a reset only when the
counter falls to near zero. Any other drop (1000, 999, 1000... from two exporters answering
in turn) makes the rate implausible instead of reading each fall as a restart.

A signal declares its domain where it is declared (:mod:`daemon.sources.catalogue` for vLLM's
and the gate's, :class:`~daemon.sources.declarations.SignalDeclaration` for the others); a
configured signal without one gets the domain of its unit (:func:`unit_domain`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

# The largest whole number a float holds exactly: a count beyond it cannot be a count (a
# gauge of 1e308 waiting requests is an exporter's overflow, not a queue).
MAX_COUNT = float(2**53)


class DomainKind(StrEnum):
    """What kind of number a signal is."""

    FINITE = "finite"
    """Any finite number."""
    COUNT = "count"
    """A number of things: 0 to 2^53."""
    RATIO = "ratio"
    """A share: 0 to 1."""
    FLAG = "flag"
    """0 (false) or 1 (true); values between are allowed as an average of flags."""
    NON_NEGATIVE = "non-negative"
    """A rate, a duration, a size: 0 or more, finite."""


@dataclass(frozen=True, slots=True)
class Domain:
    """The values a signal can plausibly take: finite, within ``[low, high]``.

    Attributes:
        kind: What kind of number it is.
        low: The lowest plausible value.
        high: The highest plausible value.
    """

    kind: DomainKind
    low: float = -math.inf
    high: float = math.inf

    def describe(self) -> str:
        """The domain in words, as reasons quote it (``a count, 0 to 9.0072e+15``)."""
        if self.kind is DomainKind.FINITE:
            return "a finite number"
        if math.isinf(self.high):
            return f"a {self.kind.value} number ({self.low:g} or more)"
        return f"a {self.kind.value}, {self.low:g} to {self.high:g}"

    def problem(self, value: float) -> str | None:
        """Why ``value`` is implausible here (naming it and the domain), or None if plausible."""
        if not math.isfinite(value):
            return f"{value:g} is not {self.describe()}"
        if value < self.low or value > self.high:
            return f"{value:g} is outside its domain: {self.describe()}"
        return None


FINITE = Domain(DomainKind.FINITE)
COUNT = Domain(DomainKind.COUNT, 0.0, MAX_COUNT)
RATIO = Domain(DomainKind.RATIO, 0.0, 1.0)
FLAG = Domain(DomainKind.FLAG, 0.0, 1.0)
NON_NEGATIVE = Domain(DomainKind.NON_NEGATIVE, 0.0)

# Units whose values cannot be negative whatever is measured; others (seconds: a clock offset;
# celsius; per second: a deriv()) are only required to be finite.
_BY_UNIT = {
    "ratio": RATIO,
    "count": COUNT,
    "bytes": NON_NEGATIVE,
    "watts": NON_NEGATIVE,
    "bitmask": NON_NEGATIVE,
}


def unit_domain(unit: str) -> Domain:
    """The domain a unit implies (``ratio``: 0 to 1; ``count``: 0 to 2^53), else finite."""
    return _BY_UNIT.get(unit, FINITE)


class Implausible(ValueError):
    """Data that contradict what their signal is (a counter that fell without resetting).

    Raised by the pure derivations and turned into an ``implausible`` row where rows are built;
    the message is the reason shown to people.
    """
