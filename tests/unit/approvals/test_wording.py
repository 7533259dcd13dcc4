"""How numbers, durations and thresholds read in messages."""

from __future__ import annotations

import pytest

from daemon.approvals.wording import clip, format_duration, format_signal, format_value, thresholds


@pytest.mark.parametrize(
    ("knob", "value", "text"),
    [
        ("max_num_seqs", 192.0, "192"),
        ("max_num_seqs", 191.6, "192"),
        ("watermark", 0.015, "0.015"),
        ("watermark", 0.0, "0"),
        ("enable_log_requests", 1.0, "on"),
        ("enable_log_requests", 0.0, "off"),
        ("log_level", 30.0, "WARNING (30)"),
        ("log_level", 25.0, "25"),
        ("unknown_knob", 2.5, "2.5"),
    ],
)
def test_knob_values(knob: str, value: float, text: str) -> None:
    assert format_value(knob, value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "no data"), (True, "true"), (0.8234, "0.8234"), (1234567.0, "1.235e+06"), ("x", "x")],
)
def test_signal_values(value: object, text: str) -> None:
    assert format_signal(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.4, "0 s"),
        (45, "45 s"),
        (60, "1 min"),
        (130, "2 min 10 s"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("condition", "signal", "found"),
    [
        ("preemptions_per_s > 0.5 && ttft_p95_s > 2.0", "ttft_p95_s", ("> 2.0",)),
        ("0.9 <= kv_usage", "kv_usage", (">= 0.9",)),
        ("kv_usage >= 0.9 && kv_usage < 1e0", "kv_usage", (">= 0.9", "< 1e0")),
        ("my_kv_usage > 3", "kv_usage", ()),
        ("kv_usage_max > 3", "kv_usage", ()),
        ("rate(x) > 3", "x", ()),
    ],
)
def test_thresholds_are_picked_from_the_condition(
    condition: str, signal: str, found: tuple[str, ...]
) -> None:
    assert thresholds(condition, signal) == found


def test_clip() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("abcd", 3) == "ab…"
