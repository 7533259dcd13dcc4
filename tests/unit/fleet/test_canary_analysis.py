"""The canary analysis: a pass/fail rule with stated thresholds, its figures recorded."""

from __future__ import annotations

import pytest

from daemon.fleet.canary_analysis import CanaryRule, CanaryVerdict, ServerCounts, judge_canary

RULE = CanaryRule(
    window_s=60,
    max_attainment_drop=0.05,
    max_goodput_drop=0.10,
    max_error_rate_rise=0.01,
    min_requests=20,
)


def _server(member: str, finished: float, within: float, errors: float = 0) -> ServerCounts:
    return ServerCounts(member, finished, within, errors, seconds=60)


BASELINE = [_server("b/1", 600, 570), _server("b/2", 600, 570)]  # 95%, 9.5 req/s each


@pytest.mark.parametrize(
    ("canary", "passed", "failure"),
    [
        (_server("c/1", 600, 570), True, ""),
        (_server("c/1", 620, 590), True, ""),  # better is a pass
        (_server("c/1", 600, 543), True, ""),  # 4.5 points lower: within 5
        (_server("c/1", 600, 528), False, "SLO attainment 7.0 points lower (at most 5)"),
        (_server("c/1", 450, 420), False, "goodput 26.3% lower (at most 10%)"),
        (_server("c/1", 600, 570, errors=20), False, "error rate 3.2 points higher (at most 1)"),
    ],
)
def test_the_canary_passes_only_when_every_metric_is_within_its_threshold(
    canary: ServerCounts, passed: bool, failure: str
) -> None:
    verdict = judge_canary(RULE, [canary], BASELINE)
    assert verdict.passed is passed
    assert verdict.failures == ((failure,) if failure else ())


def test_too_few_requests_fail_and_the_comparisons_are_still_reported() -> None:
    verdict = judge_canary(RULE, [_server("c/1", 10, 10)], BASELINE)
    assert not verdict.passed
    assert verdict.failures == (
        "inconclusive: canary finished 10 requests, fewer than 20",
        "goodput 98.2% lower (at most 10%)",
    )


def test_the_figures_are_pooled_per_side_and_survive_the_journal() -> None:
    verdict = judge_canary(RULE, [_server("c/1", 600, 528)], BASELINE)
    assert verdict.baseline.servers == 2
    assert verdict.baseline.slo_attainment == pytest.approx(0.95)
    assert verdict.baseline.goodput_per_server == pytest.approx(9.5)
    assert verdict.canary.goodput_per_server == pytest.approx(8.8)
    assert verdict.summary() == (
        "SLO attainment 88.0% vs 95.0%, goodput 8.80 vs 9.50 req/s per server, errors 0.0% vs "
        "0.0%: SLO attainment 7.0 points lower (at most 5)"
    )
    assert CanaryVerdict.from_dict(verdict.to_dict()) == verdict


def test_no_baseline_is_unknown_and_unknown_is_never_a_pass() -> None:
    verdict = judge_canary(RULE, [_server("c/1", 600, 570)], [])
    assert not verdict.passed
    assert verdict.baseline.slo_attainment is None
    assert verdict.failures == ("inconclusive: baseline finished 0 requests, fewer than 20",)
    assert "unknown" in verdict.summary()
