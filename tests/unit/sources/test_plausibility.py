"""Implausible values are their own state, never a value to act on (issue 15, finding 3).

Each case goes through the real parser, the signal store and the view, as a scrape does.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from daemon.core.errors import MetricsParseError
from daemon.policy.evaluate import condition_result
from daemon.policy.expressions import compile_condition
from daemon.policy.views import target_views
from daemon.sources.derivations import counter_rate, is_reset
from daemon.sources.domains import COUNT, FINITE, RATIO, Implausible, unit_domain
from daemon.sources.registry import BUILTIN
from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore
from daemon.sources.view import IMPLAUSIBLE, OK, SignalRow, ViewContext, signal_rows
from tests.unit.sources.vllm_pages import QWEN, V0_33, parse

RUNNING = f'vllm:num_requests_running{{engine="0",model_name="{QWEN}"}} 12.0'
WAITING = f'vllm:num_requests_waiting{{engine="0",model_name="{QWEN}"}} 3.0'
KV = f'vllm:kv_cache_usage_perc{{engine="0",model_name="{QWEN}"}} 0.8125'
PREEMPTIONS = f'vllm:num_preemptions_total{{engine="0",model_name="{QWEN}"}} 7.0'
PROMPT = f'vllm:prompt_tokens_total{{engine="0",model_name="{QWEN}"}} 183245.0'
WALL = datetime(2026, 1, 1, tzinfo=UTC)


def _rows(pages: list[tuple[float, str]], now: float, window_s: float = 60.0) -> list[SignalRow]:
    store = SignalStore()
    for at, page in pages:
        store.add(parse(page, at=at).samples)
    context = ViewContext(now=now, window_s=window_s, stale_after=lambda _: 10.0, targets=("main",))
    return signal_rows(store, context)


def _row(rows: list[SignalRow], name: str) -> SignalRow:
    return next(
        r for r in rows if r.name == name and r.target == "main" and "engine" not in r.labels
    )


@pytest.mark.parametrize(
    ("line", "value", "name", "domain"),
    [
        (RUNNING, "-3", "running", "a count, 0 to"),
        (WAITING, "1e308", "waiting", "a count, 0 to"),
        (KV, "7.5", "kv_usage", "a ratio, 0 to 1"),
        (KV, "-5", "kv_usage", "a ratio, 0 to 1"),
    ],
)
def test_a_gauge_outside_its_domain_is_implausible_with_the_reason(
    line: str, value: str, name: str, domain: str
) -> None:
    page = V0_33.replace(line, line.rsplit(" ", 1)[0] + " " + value)
    row = _row(_rows([(100.0, page)], now=100.0), name)
    assert row.state == IMPLAUSIBLE
    assert row.value is None, "an implausible value is withheld, as a stale one is"
    assert f"{float(value):g}" in row.reason
    assert domain in row.reason


def test_a_plausible_page_is_ok_with_no_reason() -> None:
    row = _row(_rows([(100.0, V0_33)], now=100.0), "kv_usage")
    assert (row.state, row.value, row.reason) == (OK, 0.8125, "")


def test_a_counter_alternating_1000_and_999_has_no_rate() -> None:
    pages = [
        (
            float(t),
            V0_33.replace(PREEMPTIONS, PREEMPTIONS.replace("7.0", "1000" if t % 4 else "999")),
        )
        for t in range(0, 62, 2)
    ]
    row = _row(_rows(pages, now=60.0), "preemptions_per_s")
    # Before: each fall to 999 was read as a restart counting 999 preemptions (about 250/s).
    assert row.state == IMPLAUSIBLE
    assert row.value is None
    assert "fell from 1000 to 999" in row.reason


@pytest.mark.parametrize("first", ["-1.7e308", "1.7e308"])
def test_a_counter_beyond_any_count_gives_no_infinite_rate(first: str) -> None:
    pages = [
        (30.0, V0_33.replace(PROMPT, PROMPT.replace("183245.0", first))),
        (60.0, V0_33.replace(PROMPT, PROMPT.replace("183245.0", "1.7e308"))),
    ]
    row = _row(_rows(pages, now=60.0), "prompt_tokens_per_s")
    # Before: -1.7e308 then 1.7e308 gave a rate of inf, state ok.
    assert row.state == IMPLAUSIBLE
    assert f"{float(first):g}" in row.reason
    assert "a count" in row.reason


def test_a_real_restart_still_counts_from_zero() -> None:
    pages = [
        (0.0, V0_33.replace(PREEMPTIONS, PREEMPTIONS.replace("7.0", "1000"))),
        (30.0, V0_33.replace(PREEMPTIONS, PREEMPTIONS.replace("7.0", "1030"))),
        (60.0, V0_33.replace(PREEMPTIONS, PREEMPTIONS.replace("7.0", "6"))),
    ]
    row = _row(_rows(pages, now=60.0, window_s=61.0), "preemptions_per_s")
    # 1000 -> 1030 is +30; the restart brings +6 (from zero).
    assert row.state == OK
    assert row.value == pytest.approx(36 / 60)


@pytest.mark.parametrize(
    ("before", "after", "reset"),
    [
        (1000.0, 999.0, False),
        (1000.0, 500.0, False),
        (1000.0, 100.0, True),  # a tenth of the value before
        (1000.0, 101.0, False),
        (7.0, 3.0, True),  # a slow counter restarting at a handful
        (50.0, 10.0, True),  # the floor
        (50.0, 11.0, False),
        (5.0, 5.0, False),  # no drop at all
    ],
)
def test_a_reset_is_a_drop_to_near_zero(before: float, after: float, reset: bool) -> None:
    assert is_reset(before, after) is reset


def test_counter_rate_raises_on_a_drop_that_is_no_reset() -> None:
    with pytest.raises(Implausible, match="fell from 1000 to 999"):
        counter_rate([(0.0, 1000.0), (10.0, 999.0), (20.0, 1000.0)], window_s=30, now=20.0)
    with pytest.raises(Implausible, match="-1 is outside"):
        counter_rate([(0.0, -1.0), (20.0, 0.0)], window_s=30, now=20.0)


def test_a_duplicate_series_rejects_the_page_with_a_reason() -> None:
    with pytest.raises(MetricsParseError, match="duplicate series") as raised:
        parse(V0_33.replace(RUNNING, RUNNING + "\n" + RUNNING.replace("12.0", "0.0")))
    assert raised.value.detail == "duplicate-series"
    assert "vllm:num_requests_running" in str(raised.value)


def test_other_sources_are_checked_against_their_declared_or_unit_domain() -> None:
    assert BUILTIN.get("gpu_utilization_ratio") is not None
    store = SignalStore()
    key = SeriesKey("gpu_utilization_ratio", (("gpu", "0"),))
    store.add([Sample(key, 1.7, 99.0, "nvml")])
    store.add([Sample(SeriesKey("queue_depth"), -4.0, 99.0, "prometheus")])
    context = ViewContext(now=100.0, window_s=60.0, stale_after=lambda _: 10.0, targets=())
    rows = {row.name: row for row in signal_rows(store, context)}
    assert rows["gpu_utilization_ratio"].state == IMPLAUSIBLE
    assert "1.7 is outside its domain: a ratio, 0 to 1" in rows["gpu_utilization_ratio"].reason
    # A configured signal with no unit is only required to be finite.
    assert rows["queue_depth"].state == OK
    assert unit_domain("count") == COUNT
    assert unit_domain("ratio") == RATIO
    assert unit_domain("celsius") == FINITE
    assert FINITE.problem(math.inf) == "inf is not a finite number"


def test_a_policy_never_sees_an_implausible_value() -> None:
    page = V0_33.replace(RUNNING, RUNNING.replace("12.0", "-3"))
    rows = _rows([(100.0, page)], now=100.0)
    view = target_views(rows, ["main"])["main"]
    assert "running" not in view.signals
    assert view.implausible["running"].startswith("-3 is outside its domain")
    condition = compile_condition("running < 0.0", BUILTIN)
    assert condition_result(condition, view) == (
        "implausible",
        "running: " + view.implausible["running"],
    )
