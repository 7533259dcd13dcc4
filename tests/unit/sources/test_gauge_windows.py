from __future__ import annotations

import pytest

from daemon.sources.gauge_windows import avg_over_window, max_over_window, min_over_window

KV = [(0.0, 0.2), (10.0, 0.9), (20.0, 0.5), (30.0, float("nan")), (40.0, 0.7)]


def test_avg_max_min_over_the_window_ignore_points_outside_it_and_nan() -> None:
    # Window (10, 40]: 0.5 and 0.7 (t=10 is outside, the left edge is open; NaN is skipped).
    assert avg_over_window(KV, 30, 40) == pytest.approx(0.6)
    assert max_over_window(KV, 30, 40) == 0.7
    assert min_over_window(KV, 30, 40) == 0.5
    assert max_over_window(KV, 41, 40) == 0.9


def test_too_little_data_is_none_not_zero() -> None:
    assert avg_over_window(KV, 300, 40) is None  # 40 s of data cannot stand for 300
    assert max_over_window([], 30, 40) is None
    assert min_over_window([(39.0, 1.0)], 30, 40) is None


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        avg_over_window(KV, 0, 40)
