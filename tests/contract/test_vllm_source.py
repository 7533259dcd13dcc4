"""The vLLM source against a real HTTP server serving recorded /metrics pages."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest

from daemon.core.errors import MetricsParseError, SourceUnavailable
from daemon.sources.vllm_source import VllmSource
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import Behaviour, HostileServer, ok_head, read_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"


def _source(exporter: FixtureExporter) -> VllmSource:
    return VllmSource("main", exporter.base_url, interval_s=1, timeout_s=2)


def _values(samples: tuple[object, ...], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {s.key.labels: s.value for s in samples if s.key.name == name}  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_a_healthy_server_yields_samples_health_and_version() -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        async with _source(exporter) as source:
            result = await source.poll(now=10.0)
    assert result.detail == ""
    assert source.version == "0.33.0"
    names = {sample.key.name for sample in result.samples}
    assert {"vllm_num_requests_running", "vllm_health_ok", "vllm_version_info"} <= names
    assert all(sample.at == 10.0 and sample.source == "vllm/main" for sample in result.samples)
    assert set(_values(result.samples, "vllm_health_ok").values()) == {1.0}
    assert all(accept is None for _path, accept in exporter.script.requests)


@pytest.mark.asyncio
async def test_refused_is_starting_and_503_is_unhealthy() -> None:
    exporter = FixtureExporter(Script(metrics=(FIXTURES / "v0.33-synthesized.txt").read_bytes()))
    source = _source(exporter)
    with pytest.raises(SourceUnavailable) as refused:
        await source.poll(now=1.0)
    assert refused.value.detail == "starting"
    exporter.script.health_status = 503
    with exporter:
        result = await source.poll(now=2.0)
    assert result.detail == "unhealthy"
    assert set(_values(result.samples, "vllm_health_ok").values()) == {0.0}


@pytest.mark.asyncio
async def test_garbage_and_missing_metrics_are_parse_errors() -> None:
    with FixtureExporter(Script(metrics=b"\x00\xffnot metrics {{{")) as exporter:
        with pytest.raises(MetricsParseError):
            await _source(exporter).poll(now=1.0)
        exporter.script.metrics_status = 404
        with pytest.raises(MetricsParseError, match="HTTP 404"):
            await _source(exporter).poll(now=1.0)


@pytest.mark.asyncio
async def test_a_slow_health_check_loses_neither_the_metrics_nor_says_unhealthy() -> None:
    # Real vLLM 0.32 holds /health for seconds while its engine is busy; /metrics answers.
    page = (FIXTURES / "real-0.32-cpu" / "preempting.txt").read_bytes()
    with FixtureExporter(Script(metrics=page, health_delay_s=1.5)) as exporter:
        async with _source(exporter) as source:
            result = await source.poll(now=10.0)
    assert result.detail == "health check slow"
    assert _values(result.samples, "vllm_health_ok") == {}, "unknown, not unhealthy"
    assert _values(result.samples, "vllm_num_requests_running")


def _keep_alive_vllm(page: bytes) -> Behaviour:
    """A vLLM's /metrics, /health and /version over keep-alive connections, as uvicorn serves."""
    answers = {b"/metrics": page, b"/health": b"", b"/version": b'{"version": "0.33.0"}'}

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set() and (request := read_request(conn)):
            body = answers[request.split(b" ", 2)[1]]
            conn.sendall(ok_head(len(body)) + body)

    return behave


@pytest.mark.asyncio
async def test_polls_go_over_one_connection_kept_to_the_server() -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with HostileServer(_keep_alive_vllm(page)) as server:
        async with VllmSource("main", server.base_url, interval_s=1, timeout_s=2) as source:
            for now in (1.0, 2.0, 3.0):
                result = await source.poll(now=now)
                assert result.detail == ""
            assert server.connections == 1  # 7 requests: /version once, then /metrics, /health
        for _ in range(50):  # leaving the source closed it
            if server.in_flight == 0:
                break
            await asyncio.sleep(0.02)
        assert server.in_flight == 0
