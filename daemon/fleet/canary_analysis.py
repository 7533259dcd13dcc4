"""The canary analysis: the changed canary against the members not yet changed (pure).

In the spirit of Argo Rollouts' analysis: each metric has a stated threshold, the rule is
pass only if every metric passes, and the figures are recorded with the verdict so that the
thread and the journal show why. Over the comparison window each side's figures are pooled
from its servers' own counts:

- SLO attainment: requests whose first token came within ``ttft_slo_s`` / requests served.
  Fails when the canary's is more than ``max_attainment_drop`` (points) below the
  baseline's.
- Goodput: requests within the SLO per second, per server. Fails when the canary's is more
  than ``max_goodput_drop`` (relative) below the baseline's.
- Errors: failed requests / all requests. Fails when the canary's is more than
  ``max_error_rate_rise`` (points) above the baseline's.

Too few requests on either side (``min_requests``) is inconclusive, and inconclusive fails:
unknown is never a pass (the canary is reverted, the rollout stops).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CanaryRule:
    """The thresholds of a canary analysis.

    Attributes:
        window_s: How long the canary runs changed before it is judged.
        max_attainment_drop: The largest fall of SLO attainment allowed (a fraction: 0.05 is
            5 points).
        max_goodput_drop: The largest relative fall of goodput per server (0.10 is 10%).
        max_error_rate_rise: The largest rise of the error rate (0.01 is 1 point).
        min_requests: The fewest finished requests on each side for a verdict.
        ttft_slo_s: The TTFT a request must meet to count within the SLO.
    """

    window_s: float = 300.0
    max_attainment_drop: float = 0.05
    max_goodput_drop: float = 0.10
    max_error_rate_rise: float = 0.01
    min_requests: int = 20
    ttft_slo_s: float = 2.0

    def to_dict(self) -> dict[str, Any]:
        """The rule as a rollout carries it (every governor judges by the proposer's rule)."""
        return {
            "window_s": self.window_s,
            "max_attainment_drop": self.max_attainment_drop,
            "max_goodput_drop": self.max_goodput_drop,
            "max_error_rate_rise": self.max_error_rate_rise,
            "min_requests": self.min_requests,
            "ttft_slo_s": self.ttft_slo_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CanaryRule:
        """A carried rule."""
        return cls(
            float(data["window_s"]),
            float(data["max_attainment_drop"]),
            float(data["max_goodput_drop"]),
            float(data["max_error_rate_rise"]),
            int(data["min_requests"]),
            float(data["ttft_slo_s"]),
        )


DEFAULT_RULE = CanaryRule()
"""The rule of a ``scope: group`` policy that states no ``canary``."""


@dataclass(frozen=True, slots=True)
class ServerCounts:
    """One server's counts over the comparison window.

    Attributes:
        member: ``HOST/INSTANCE``.
        finished: Requests finished.
        within_slo: Of those, the requests that met the SLO.
        errors: Requests that failed.
        seconds: The span the counts cover.
    """

    member: str
    finished: float
    within_slo: float
    errors: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The counts as a member publishes them."""
        return {
            "member": self.member,
            "finished": self.finished,
            "within_slo": self.within_slo,
            "errors": self.errors,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerCounts:
        """Published counts.

        Raises:
            KeyError, TypeError, ValueError: not counts.
        """
        return cls(
            str(data["member"]),
            float(data["finished"]),
            float(data["within_slo"]),
            float(data["errors"]),
            float(data["seconds"]),
        )


@dataclass(frozen=True, slots=True)
class SideFigures:
    """One side's pooled figures (``None``: not enough data to say)."""

    servers: int
    finished: float
    slo_attainment: float | None
    goodput_per_server: float | None
    error_rate: float | None

    def to_dict(self) -> dict[str, Any]:
        """The figures as stored with the verdict."""
        return {
            "servers": self.servers,
            "finished": self.finished,
            "slo_attainment": self.slo_attainment,
            "goodput_per_server": self.goodput_per_server,
            "error_rate": self.error_rate,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SideFigures:
        """Stored figures."""
        return cls(
            int(data["servers"]),
            float(data["finished"]),
            _maybe(data["slo_attainment"]),
            _maybe(data["goodput_per_server"]),
            _maybe(data["error_rate"]),
        )


@dataclass(frozen=True, slots=True)
class CanaryVerdict:
    """The analysis' decision and its evidence.

    Attributes:
        passed: Whether the rollout may go on.
        canary: The canary's figures.
        baseline: The unchanged members' figures.
        failures: Each failed check in words (empty when passed).
    """

    passed: bool
    canary: SideFigures
    baseline: SideFigures
    failures: tuple[str, ...]

    def summary(self) -> str:
        """One line for people: the figures and, when it failed, why."""
        figures = (
            f"SLO attainment {_pct(self.canary.slo_attainment)} vs "
            f"{_pct(self.baseline.slo_attainment)}, goodput "
            f"{_num(self.canary.goodput_per_server)} vs "
            f"{_num(self.baseline.goodput_per_server)} req/s per server, errors "
            f"{_pct(self.canary.error_rate)} vs {_pct(self.baseline.error_rate)}"
        )
        return figures if self.passed else f"{figures}: {'; '.join(self.failures)}"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as stored in the rollout."""
        return {
            "passed": self.passed,
            "canary": self.canary.to_dict(),
            "baseline": self.baseline.to_dict(),
            "failures": list(self.failures),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CanaryVerdict:
        """A stored verdict."""
        return cls(
            bool(data["passed"]),
            SideFigures.from_dict(data["canary"]),
            SideFigures.from_dict(data["baseline"]),
            tuple(str(line) for line in data["failures"]),
        )


def judge_canary(
    rule: CanaryRule, canary: Sequence[ServerCounts], baseline: Sequence[ServerCounts]
) -> CanaryVerdict:
    """The verdict of ``rule`` on the canary's counts against the baseline's."""
    ours, theirs = _pooled(canary), _pooled(baseline)
    failures: list[str] = []
    for side, name in ((ours, "canary"), (theirs, "baseline")):
        if side.finished < rule.min_requests:
            failures.append(
                f"inconclusive: {name} finished {side.finished:g} requests, "
                f"fewer than {rule.min_requests}"
            )
    # Compared even when inconclusive: the figures a person reads should say all that failed.
    failures.extend(_compared(rule, ours, theirs))
    return CanaryVerdict(not failures, ours, theirs, tuple(failures))


def _compared(rule: CanaryRule, ours: SideFigures, theirs: SideFigures) -> list[str]:
    failures = []
    if ours.slo_attainment is not None and theirs.slo_attainment is not None:
        drop = theirs.slo_attainment - ours.slo_attainment
        if drop > rule.max_attainment_drop:
            failures.append(
                f"SLO attainment {drop * 100:.1f} points lower "
                f"(at most {rule.max_attainment_drop * 100:g})"
            )
    if ours.goodput_per_server is not None and theirs.goodput_per_server:
        drop = 1 - ours.goodput_per_server / theirs.goodput_per_server
        if drop > rule.max_goodput_drop:
            failures.append(
                f"goodput {drop * 100:.1f}% lower (at most {rule.max_goodput_drop * 100:g}%)"
            )
    if ours.error_rate is not None and theirs.error_rate is not None:
        rise = ours.error_rate - theirs.error_rate
        if rise > rule.max_error_rate_rise:
            failures.append(
                f"error rate {rise * 100:.1f} points higher "
                f"(at most {rule.max_error_rate_rise * 100:g})"
            )
    return failures


def _pooled(servers: Sequence[ServerCounts]) -> SideFigures:
    finished = sum(s.finished for s in servers)
    within = sum(s.within_slo for s in servers)
    errors = sum(s.errors for s in servers)
    seconds = sum(s.seconds for s in servers)
    attempted = finished + errors
    return SideFigures(
        servers=len(servers),
        finished=finished,
        slo_attainment=within / finished if finished else None,
        # Per server: the canary is one server, the baseline several.
        goodput_per_server=within / seconds if seconds > 0 else None,
        error_rate=errors / attempted if attempted else None,
    )


def _maybe(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"
