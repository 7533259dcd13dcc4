"""The Prometheus source against a real Prometheus scraping a fixture exporter, and against
a fake one that answers garbage or slowly."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from daemon.core.backoff import Backoff
from daemon.core.clock import SystemClock
from daemon.core.errors import MetricsParseError, SourceUnavailable
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.polling import PollingRunner
from daemon.sources.prometheus_source import PrometheusSource
from daemon.sources.samples import Sample
from daemon.sources.store import SignalStore
from tests.support.fake_prometheus import Answer, FakePrometheus
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.prometheus import JOB, Prometheus
from tests.support.services import free_port, require_command
from tests.support.tasks import eventually, leaked_tasks, running

pytestmark = [pytest.mark.service("prometheus"), pytest.mark.asyncio]

PAGE = b"""\
# HELP fixture_temperature_celsius GPU temperature.
# TYPE fixture_temperature_celsius gauge
fixture_temperature_celsius{gpu="0",model="a"} 61.5
fixture_temperature_celsius{gpu="1",model="a"} 70
# HELP fixture_requests_total Requests served.
# TYPE fixture_requests_total counter
fixture_requests_total 1234
"""


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task running."""
    yield
    assert not await leaked_tasks()


@pytest.fixture(scope="module")
def exporter() -> Iterator[FixtureExporter]:
    """The scrape target: a gauge with two series and a counter."""
    with FixtureExporter(Script(metrics=PAGE)) as fixture:
        yield fixture


@pytest.fixture(scope="module")
def prometheus(
    exporter: FixtureExporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    """One real Prometheus for the module: its first scrape takes about 5 s."""
    executable = require_command("prometheus")
    target = f"127.0.0.1:{exporter.port}"
    with Prometheus(executable, tmp_path_factory.mktemp("prometheus"), target) as server:
        yield server


def _by_name(samples: tuple[Sample, ...]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for sample in samples:
        found.setdefault(sample.key.name, {})[sample.key.labels] = sample.value
    return found


async def test_scalar_and_vector_results_map_to_samples(
    prometheus: Prometheus, exporter: FixtureExporter
) -> None:
    queries = {
        "gpu_temp_c": "fixture_temperature_celsius",
        "hottest_gpu_c": "max(fixture_temperature_celsius)",
        "requests": "scalar(fixture_requests_total)",
    }
    source = PrometheusSource(prometheus.url, queries, timeout_s=5, keep_labels=["gpu"])
    async with source:
        result = await source.poll(now=42.0)
    instance = ("instance", f"127.0.0.1:{exporter.port}")
    assert _by_name(result.samples) == {
        "gpu_temp_c": {
            (("gpu", "0"), instance, ("job", JOB)): 61.5,
            (("gpu", "1"), instance, ("job", JOB)): 70.0,
        },
        "hottest_gpu_c": {(): 70.0},
        "requests": {(): 1234.0},
    }
    assert result.detail == ""
    assert all(s.at == 42.0 and s.source == "prometheus" for s in result.samples)


async def test_failed_empty_or_ambiguous_queries_are_no_data_for_their_signal_only(
    prometheus: Prometheus, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    queries = {
        "requests": "fixture_requests_total",
        "broken": "sum(",
        "absent": "fixture_does_not_exist",
        "range": "fixture_requests_total[1m]",
        # Without ``gpu`` in the keep-list both series would become one: refuse to guess.
        "ambiguous": "fixture_temperature_celsius",
        "nan": "vector(0) / 0",
    }
    source = PrometheusSource(prometheus.url, queries, timeout_s=5)
    async with source:
        first = await source.poll(now=1.0)
        second = await source.poll(now=2.0)
        assert set(_by_name(first.samples)) == set(_by_name(second.samples)) == {"requests"}
        assert first.detail == second.detail == "partial"
        failed = [r for r in caplog.records if r.getMessage() == "prometheus query failed"]
        assert sorted((r.signal, r.reason) for r in failed) == [  # type: ignore[attr-defined]
            ("ambiguous", "ambiguous"),
            ("broken", "rejected"),
            ("range", "rejected"),
        ], "one line per signal, not per poll"
        no_data = [r for r in caplog.records if r.getMessage() == "prometheus signal has no data"]
        assert sorted((r.signal, r.reason) for r in no_data) == [  # type: ignore[attr-defined]
            ("absent", "empty"),
            ("nan", "not_a_number"),
        ]
        source.queries["absent"] = "fixture_requests_total"
        third = await source.poll(now=3.0)
    assert set(_by_name(third.samples)) == {"requests", "absent"}
    recovered = [r for r in caplog.records if r.getMessage() == "prometheus signal has data again"]
    assert [r.signal for r in recovered] == ["absent"]  # type: ignore[attr-defined]


async def test_prometheus_down_at_start_then_up(
    exporter: FixtureExporter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    port = free_port()
    server = Prometheus(
        require_command("prometheus"), tmp_path, f"127.0.0.1:{exporter.port}", port=port
    )
    source = PrometheusSource(
        server.url, {"one": "vector(1)", "two": "scalar(vector(2))"}, interval_s=0.1, timeout_s=2
    )
    async with source:
        with pytest.raises(SourceUnavailable) as refused:
            await source.poll(now=0.0)
    assert refused.value.detail == "unreachable"
    store, health = SignalStore(), HealthBoard()
    backoff = Backoff(base_s=0.05, cap_s=0.2, rng=random.Random(0))
    runner = PollingRunner(source, store, health, SystemClock(), backoff)
    started = asyncio.Event()
    try:
        async with running(runner.run(started.set), "prometheus source") as task:
            await asyncio.wait_for(started.wait(), 10)
            await eventually(lambda: backoff.failures >= 2, "retries", task=task)
            entry = health.get("prometheus")
            assert entry is not None
            assert (entry.state, entry.detail) == (SourceState.DOWN, "unreachable")
            # Readiness is enough here: these queries need no scraped data.
            await asyncio.to_thread(server.start, wait_for_scrape=False)
            await eventually(lambda: store.keys("two") != [], "samples", task=task)
    finally:
        server.stop()
    assert store.latest(store.keys("two")[0]) is not None
    entry = health.get("prometheus")
    assert entry is not None
    assert entry.state is SourceState.UP
    down = [r for r in caplog.records if r.getMessage() == "source down"]
    assert len(down) == 1, "one line for the outage, none per signal"


@pytest.mark.parametrize(
    ("answer", "error", "detail"),
    [
        (Answer(b"<html>surely not JSON"), MetricsParseError, "garbage"),
        (Answer(b'{"status": "success"}'), MetricsParseError, "garbage"),
        (Answer(b"[1, 2, 3]"), MetricsParseError, "garbage"),
        (Answer(b'{"data": {"result": {"a": 1}}}'), MetricsParseError, "garbage"),
        (
            Answer(b'{"data": {"result": [{"metric": {}, "value": "x"}]}}'),
            MetricsParseError,
            "garbage",
        ),
        (Answer(b"oops", status=502), SourceUnavailable, "unreachable"),
        (Answer(b"{}", delay_s=2.0), SourceUnavailable, "unreachable"),
    ],
    ids=["html", "no-data", "a-list", "result-a-dict", "bad-value", "bad-gateway", "slow"],
)
async def test_garbage_and_slow_answers_are_translated(
    answer: Answer, error: type[Exception], detail: str
) -> None:
    with FakePrometheus(answer) as fake:
        async with PrometheusSource(fake.url, {"a": "up", "b": "up"}, timeout_s=0.5) as source:
            with pytest.raises(error) as raised:
                await source.poll(now=0.0)
    assert getattr(raised.value, "detail", None) == detail


async def test_bad_queries_everywhere_leave_the_source_up_with_no_data() -> None:
    body = b'{"status": "error", "errorType": "bad_data", "error": "parse error"}'
    with FakePrometheus(Answer(body, status=400)) as fake:
        async with PrometheusSource(fake.url, {"a": "sum("}) as source:
            result = await source.poll(now=0.0)
    assert (result.samples, result.detail) == ((), "partial")
