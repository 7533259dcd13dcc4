"""A log-normal fitted to a histogram's bucket counts, by maximum likelihood on the bins.

vLLM's length histograms have coarse 1-2-5 buckets (100, 200, 500, 1000...), so a median
interpolated linearly inside one (Prometheus' ``histogram_quantile``) can be off by a third.
The simulator's synthetic lengths are log-normal (:class:`simulator.synthetic_workloads.\
LogNormalLengths`), so the fit asks the question synthesis needs answered: which log-normal,
drawn and rounded to whole tokens as the generator does, would have filled these buckets so?

A length ``k`` lands in the bucket ``(a, b]`` when ``a < k <= b``; the generator rounds a draw
``x`` to the nearest whole token, so the bucket holds the draws in ``(a + 0.5, b + 0.5]`` (the
lowest one everything below, since lengths are clamped to at least 1). The likelihood is
maximised by a coarse grid over (mu, sigma) and a finer one around its best point: the bins
are few (at most 17), so a few thousand evaluations cost milliseconds and need no optimiser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.synthetic_workloads import Z90

_SIGMA_MIN = 0.05
_SIGMA_MAX = 3.0
_GRID = 20


@dataclass(frozen=True, slots=True)
class LogNormal:
    """A log-normal distribution: ``ln X`` is normal with mean ``mu`` and deviation ``sigma``."""

    mu: float
    sigma: float

    @property
    def median(self) -> float:
        """The median, ``exp(mu)``."""
        return math.exp(self.mu)

    @property
    def p90(self) -> float:
        """The 90th percentile."""
        return math.exp(self.mu + Z90 * self.sigma)

    @property
    def mean(self) -> float:
        """The mean, ``exp(mu + sigma^2 / 2)``."""
        return math.exp(self.mu + self.sigma**2 / 2)

    def cdf(self, x: float) -> float:
        """P(X <= x)."""
        if x <= 0:
            return 0.0
        return 0.5 * (1.0 + math.erf((math.log(x) - self.mu) / (self.sigma * math.sqrt(2.0))))


def fit_lognormal(
    counts: Sequence[tuple[float, float]], start_median: float, start_p90: float, mean: float
) -> LogNormal:
    """The log-normal most likely to have produced these per-bucket counts.

    Args:
        counts: ``(upper bound, observations in the bucket)``, ascending bounds, ``inf`` last;
            not cumulative.
        start_median: A first guess of the median (the interpolated one).
        start_p90: A first guess of the 90th percentile.
        mean: The observed mean; only breaks ties where the bins cannot (all in one bucket).

    Returns:
        The fitted distribution.
    """
    # The grid is centred on the interpolated median; p90 only widens it for a wide spread.
    mu0 = math.log(max(start_median, 1.0))
    reach = max(2.0, 2 * math.log(max(start_p90, 1.0) / max(start_median, 1.0)))
    edges = [bound + 0.5 for bound, _ in counts[:-1]]

    def score(mu: float, sigma: float) -> float:
        return _log_likelihood(LogNormal(mu, sigma), edges, counts, mean)

    best = max(
        (score(mu, sigma), mu, sigma)
        for mu in _span(mu0 - reach, mu0 + reach)
        for sigma in _span(_SIGMA_MIN, _SIGMA_MAX)
    )
    mu_step, sigma_step = 2 * reach / _GRID, (_SIGMA_MAX - _SIGMA_MIN) / _GRID
    _, mu1, sigma1 = best
    finer = max(
        (score(mu, sigma), mu, sigma)
        for mu in _span(mu1 - mu_step, mu1 + mu_step)
        for sigma in _span(max(_SIGMA_MIN, sigma1 - sigma_step), sigma1 + sigma_step)
    )
    return LogNormal(finer[1], finer[2])


def _span(low: float, high: float) -> list[float]:
    return [low + (high - low) * index / _GRID for index in range(_GRID + 1)]


def _log_likelihood(
    dist: LogNormal, edges: list[float], counts: Sequence[tuple[float, float]], mean: float
) -> float:
    total = 0.0
    below = 0.0
    for index, (_, count) in enumerate(counts):
        above = dist.cdf(edges[index]) if index < len(edges) else 1.0
        if count > 0:
            total += count * math.log(max(above - below, 1e-300))
        below = above
    # A tie-breaker worth one observation: when the bins cannot tell (all in one bucket), the
    # mean places the median inside it.
    if mean > 0:
        total -= math.log(dist.mean / mean) ** 2
    return total
