"""A hostile vLLM target beside a healthy one: the daemon keeps serving the healthy one.

Issue 15, finding 1: a target that trickled its /metrics at one byte a second blinded the
governor to every server within about 30 s (each abandoned scrape kept a thread of the pool
that every scrape shared), and SIGTERM then exited 70 (the stop waited on those threads).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HostileServer, ok_head, trickle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
WATCH_S = 40.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _instance(name: str, url: str) -> str:
    # The defaults of [[vllm]]: a scrape every 2 s, 1.5 s to answer, stale after 10 s.
    return f'[[vllm]]\nname = "{name}"\nurl = "{url}"\n'


def _healthy_view(socket: Path) -> tuple[dict[str, Any], str | None]:
    answer = call_daemon(socket, "signals", prefix="running")
    source = next(entry for entry in answer["sources"] if entry["source"] == "vllm/healthy")
    rows = [
        row["state"]
        for row in answer["signals"]
        if row["target"] == "healthy" and "engine" not in row["labels"]
    ]
    return source, rows[0] if rows else None


def test_a_slowloris_metrics_server_leaves_the_healthy_target_fresh_and_the_stop_clean(
    short_tmp: Path,
) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    slowloris = trickle(ok_head(len(page)), page, bytes_per_s=1.0)
    with FixtureExporter(Script(metrics=page)) as healthy, HostileServer(slowloris) as hostile:
        extra = _instance("healthy", healthy.base_url) + _instance("hostile", hostile.base_url)
        config = write_config(short_tmp, extra=extra, deadline_s=5.0)
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            deadline = time.monotonic() + 15
            while _healthy_view(socket)[1] != "ok":
                assert time.monotonic() < deadline, "the healthy target never became fresh"
                time.sleep(0.2)

            bad: list[str] = []
            end = time.monotonic() + WATCH_S
            while time.monotonic() < end:
                source, row = _healthy_view(socket)
                if source["state"] != "up" or row != "ok":
                    seen = f"{source['state']}: {source.get('last_error') or source['detail']}"
                    bad.append(f"{end - time.monotonic():.0f}s left: {seen}, signal {row}")
                time.sleep(0.5)
            assert daemon.process.poll() is None
            assert not bad, f"the healthy target was not up and fresh throughout: {bad[:5]}"
            assert hostile.connections >= 5, "the hostile target was scraped all along"
            assert hostile.max_in_flight == 1, "one scrape at a time, each one ended"

            daemon.signal(signal.SIGTERM)
            started = time.monotonic()
            assert daemon.process.wait(timeout=10) == 0
            assert time.monotonic() - started < 3.0, "a stop does not wait for a slow page"
