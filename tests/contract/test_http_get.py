from __future__ import annotations

import pytest

from daemon.core.errors import SourceError, SourceUnavailable
from daemon.sources.http_get import http_get
from tests.support.fixture_exporter import FixtureExporter, Script


@pytest.mark.asyncio
async def test_answers_of_any_status_come_back_without_an_accept_header() -> None:
    with FixtureExporter(Script(metrics=b"m 1\n", health_status=503)) as exporter:
        metrics = await http_get(exporter.base_url + "/metrics", 2)
        health = await http_get(exporter.base_url + "/health", 2)
        assert (metrics.status, metrics.body) == (200, b"m 1\n")
        assert health.status == 503
        assert exporter.script.requests[0] == ("/metrics", None)


@pytest.mark.asyncio
async def test_refused_slow_and_bad_urls_are_translated() -> None:
    exporter = FixtureExporter()
    with pytest.raises(SourceUnavailable) as refused:
        await http_get(exporter.base_url + "/health", 2)
    assert refused.value.detail == "refused"
    with FixtureExporter(Script(delay_s=1.0)) as slow:
        with pytest.raises(SourceUnavailable) as timed_out:
            await http_get(slow.base_url + "/health", 0.2)
        assert timed_out.value.detail == "timeout"
    with pytest.raises(SourceError, match="only http"):
        await http_get("file:///etc/passwd", 1)


@pytest.mark.asyncio
async def test_proxies_in_the_environment_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    with FixtureExporter(Script(metrics=b"ok")) as exporter:
        assert (await http_get(exporter.base_url + "/metrics", 2)).body == b"ok"
