from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.sources.derivations import (
    bucket_quantile,
    buckets_of,
    counter_increase,
    counter_rate,
    histogram_quantile,
    points_of,
)
from tests.unit.sources.vllm_pages import V0_33, histogram_page, labels, parse

INF = math.inf
BOUNDS = ["0.1", "0.25", "0.5", "1.0", "+Inf"]


# Counter rates


def test_rate_is_the_increase_over_the_time_between_the_points() -> None:
    assert counter_rate([(0.0, 10.0), (10.0, 60.0)], window_s=20, now=10.0) == 5.0
    assert counter_increase([(0.0, 10.0), (10.0, 60.0)], window_s=20, now=10.0) == 50.0


def test_a_counter_that_did_not_move_has_a_rate_of_zero_not_none() -> None:
    assert counter_rate([(0.0, 7.0), (5.0, 7.0), (10.0, 7.0)], window_s=10, now=10.0) == 0.0


def test_a_drop_is_a_restart_counting_from_zero() -> None:
    points = [(0.0, 100.0), (10.0, 120.0), (20.0, 5.0), (30.0, 9.0)]
    # 100 -> 120 is +20; the restart brings +5 (from zero); 5 -> 9 is +4.
    assert counter_increase(points, window_s=40, now=30.0) == 29.0
    assert counter_rate(points, window_s=40, now=30.0) == pytest.approx(29.0 / 30.0)


def test_no_data_is_none_never_zero() -> None:
    assert counter_rate([], window_s=30, now=100.0) is None
    assert counter_rate([(95.0, 4.0)], window_s=30, now=100.0) is None
    # Two points, but both before the window.
    assert counter_rate([(10.0, 1.0), (20.0, 2.0)], window_s=30, now=100.0) is None
    # Two points 5 s apart do not cover half of a 60 s window (just after start-up).
    assert counter_rate([(95.0, 1.0), (100.0, 2.0)], window_s=60, now=100.0) is None
    # Nor do two old points in the window when the source has gone quiet since.
    assert counter_rate([(41.0, 1.0), (46.0, 2.0)], window_s=60, now=100.0) is None


def test_the_window_is_open_on_the_left_and_ignores_the_future() -> None:
    points = [(0.0, 0.0), (10.0, 10.0), (20.0, 30.0), (30.0, 1000.0)]
    # Window (0, 20]: the point at 0 is out, as is the one after now.
    assert counter_increase(points, window_s=20, now=20.0) == 20.0


def test_non_finite_points_are_ignored() -> None:
    points = [(0.0, 1.0), (5.0, math.nan), (10.0, 11.0)]
    assert counter_rate(points, window_s=20, now=10.0) == 1.0


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_s"):
        counter_rate([(0.0, 1.0)], window_s=0, now=1.0)


def test_a_restarted_server_between_two_scrapes_gives_the_right_rate() -> None:
    before = parse(V0_33, at=0.0)
    after_restart = parse(
        V0_33.replace(
            'vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 7.0',
            'vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 3.0',
        ),
        at=30.0,
    )
    key = labels(model_name="Qwen/Qwen3-8B")
    series = [
        sample
        for scrape in (before, after_restart)
        for sample in scrape.samples
        if sample.key.name == "vllm_num_preemptions_total" and sample.key.labels == key
    ]
    # 7 before, 3 after the restart: 3 preemptions in 30 s, not -4 and not 0.
    assert counter_rate(points_of(series), window_s=60, now=30.0) == pytest.approx(0.1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=2, max_size=20))
def test_a_counter_without_resets_rises_by_last_minus_first(increments: list[float]) -> None:
    values = [sum(increments[: i + 1]) for i in range(len(increments))]
    points = [(float(i), value) for i, value in enumerate(values)]
    now = float(len(values) - 1)
    rate = counter_rate(points, window_s=now + 1, now=now)
    assert rate == pytest.approx((values[-1] - values[0]) / now)


# Histogram quantiles over a window


def _ttft_buckets(*pages: tuple[float, list[float]]) -> dict[float, list[tuple[float, float]]]:
    """Bucket points of vllm_ttft_seconds from single-engine pages scraped at the given times."""
    samples = [
        sample
        for at, counts in pages
        for sample in parse(
            histogram_page("time_to_first_token_seconds", BOUNDS, counts), at
        ).samples
        if sample.key.name == "vllm_ttft_seconds_bucket" and sample.key.label("engine") is None
    ]
    return buckets_of(samples)


def test_quantile_over_a_window_matches_the_hand_computed_value() -> None:
    # Cumulative counts at 0 s and 60 s; in the window: 2, 6, 10, 10, 10 (cumulative).
    buckets = _ttft_buckets((0.0, [1, 4, 4, 5, 7]), (60.0, [3, 10, 14, 15, 17]))
    # p50: rank 5 lies in (0.1, 0.25], which holds observations 3..6: 0.1 + 0.15 * 3/4.
    assert histogram_quantile(0.5, buckets, window_s=90, now=60.0) == pytest.approx(0.2125)
    # p95: rank 9.5 lies in (0.25, 0.5], observations 7..10: 0.25 + 0.25 * 3.5/4.
    assert histogram_quantile(0.95, buckets, window_s=90, now=60.0) == pytest.approx(0.46875)
    # Over the page's whole life (not the window) p50 would differ: the window matters.
    since_start = bucket_quantile(
        0.5,
        [
            (INF if b == "+Inf" else float(b), c)
            for b, c in zip(BOUNDS, [3, 10, 14, 15, 17], strict=True)
        ],
    )
    assert since_start != pytest.approx(0.2125)


def test_quantile_handles_a_restart_inside_the_window() -> None:
    buckets = _ttft_buckets(
        (0.0, [1, 4, 4, 5, 7]), (30.0, [2, 6, 6, 7, 9]), (60.0, [1, 1, 2, 2, 2])
    )
    # Rises: (1, 2, 2, 2, 2) before the restart, then the new counts from zero.
    # In the window: 2, 3, 4, 4, 4 cumulative. p50: rank 2 -> first bucket reaching it is 0.1.
    assert histogram_quantile(0.5, buckets, window_s=90, now=60.0) == pytest.approx(0.1)
    # p75: rank 3 -> (0.1, 0.25], observation 3 of 3: 0.25.
    assert histogram_quantile(0.75, buckets, window_s=90, now=60.0) == pytest.approx(0.25)


def test_all_observations_in_the_inf_bucket_give_the_highest_finite_bound() -> None:
    # Prometheus: a quantile in the +Inf bucket is the upper bound of the second-highest.
    buckets = {
        0.1: [(0.0, 0.0), (60.0, 0.0)],
        1.0: [(0.0, 0.0), (60.0, 0.0)],
        INF: [(0.0, 0.0), (60.0, 5.0)],
    }
    assert histogram_quantile(0.5, buckets, window_s=90, now=60.0) == 1.0
    assert histogram_quantile(0.99, buckets, window_s=90, now=60.0) == 1.0


def test_an_empty_window_has_no_quantile() -> None:
    unchanged = {0.1: [(0.0, 3.0), (60.0, 3.0)], INF: [(0.0, 5.0), (60.0, 5.0)]}
    assert histogram_quantile(0.5, unchanged, window_s=90, now=60.0) is None
    no_points = {0.1: [(0.0, 3.0), (10.0, 4.0)], INF: [(0.0, 5.0), (10.0, 6.0)]}
    assert histogram_quantile(0.5, no_points, window_s=30, now=100.0) is None
    assert histogram_quantile(0.5, {}, window_s=30, now=100.0) is None


def test_single_bucket_edge_cases_follow_prometheus() -> None:
    # Only the +Inf bucket: fewer than two buckets, NaN in Prometheus, None here.
    assert bucket_quantile(0.5, [(INF, 10.0)]) is None
    # One finite bucket: interpolation from 0 to its bound.
    assert bucket_quantile(0.5, [(1.0, 4.0), (INF, 4.0)]) == 0.5
    # A lowest bound at or below zero is returned as it is.
    assert bucket_quantile(0.5, [(-1.0, 4.0), (0.0, 4.0), (INF, 4.0)]) == -1.0
    # No +Inf bucket: NaN in Prometheus, None here.
    assert bucket_quantile(0.5, [(0.1, 1.0), (1.0, 4.0)]) is None
    # q = 0 with an empty lowest bucket: 0/0, NaN in Prometheus, None here.
    assert bucket_quantile(0.0, [(0.1, 0.0), (1.0, 4.0), (INF, 4.0)]) is None
    assert bucket_quantile(0.0, [(0.1, 2.0), (1.0, 4.0), (INF, 4.0)]) == 0.0
    assert bucket_quantile(1.0, [(0.1, 2.0), (1.0, 4.0), (INF, 4.0)]) == 1.0


def test_non_monotonic_buckets_are_repaired_like_prometheus() -> None:
    # The 0.5 bucket's 1 is below the 0.25 bucket's 3: treated as 3.
    assert bucket_quantile(0.5, [(0.25, 3.0), (0.5, 1.0), (1.0, 4.0), (INF, 4.0)]) == pytest.approx(
        0.25 * 2 / 3
    )


def test_a_quantile_is_between_zero_and_one() -> None:
    with pytest.raises(ValueError, match="quantile"):
        histogram_quantile(1.5, {}, window_s=10, now=0.0)
    with pytest.raises(ValueError, match="quantile"):
        bucket_quantile(math.nan, [(INF, 1.0)])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=2, max_size=8),
    st.floats(min_value=0, max_value=1),
)
def test_a_quantile_lies_within_the_finite_bounds(per_bucket: list[int], q: float) -> None:
    bounds = [0.1 * (i + 1) for i in range(len(per_bucket) - 1)] + [INF]
    cumulative = [float(sum(per_bucket[: i + 1])) for i in range(len(per_bucket))]
    result = bucket_quantile(q, zip(bounds, cumulative, strict=True))
    if cumulative[-1] == 0:
        assert result is None
    elif result is not None:
        assert 0.0 <= result <= bounds[-2]
