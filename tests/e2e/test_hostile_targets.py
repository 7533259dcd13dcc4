"""A hostile vLLM target beside a healthy one: the daemon keeps serving the healthy one.

Issue 15, finding 1: a target that trickled its /metrics at one byte a second blinded the
governor to every server within about 30 s (each abandoned scrape kept a thread of the pool
that every scrape shared), and SIGTERM then exited 70 (the stop waited on those threads).

Issue 15, finding 2: a page of 100,000 distinct label values (8 MB) was parsed in one go on the
event loop: 7-15 s for ``status``, a watchdog ping 30 s late; its series filled the store's
global cap, which never let go, so the healthy target's signals were never stored; and
``signals --json`` failed, its reply larger than the protocol allows.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon_paged
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HostileServer, cardinality_bomb, ok_head, trickle
from tests.support.hostile_watch import WATCHDOG_USEC, wait_until_fresh, watching

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
WATCH_S = 40.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _instance(name: str, url: str) -> str:
    # The defaults of [[vllm]]: a scrape every 2 s, 1.5 s to answer, stale after 10 s.
    return f'[[vllm]]\nname = "{name}"\nurl = "{url}"\n'


def _healthy_view(socket: Path) -> tuple[dict[str, Any], str | None]:
    answer = call_daemon_paged(socket, "signals", "signals", prefix="running")
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
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            wait_until_fresh(socket, "healthy", timeout_s=15)
            with watching(daemon, "healthy") as watch:
                end = time.monotonic() + WATCH_S
                while time.monotonic() < end:
                    watch.look(socket)
                    time.sleep(0.5)
            print(watch.summary("slowloris /metrics"))
            assert daemon.process.poll() is None
            watch.assert_healthy_served()
            assert hostile.connections >= 5, "the hostile target was scraped all along"
            assert hostile.max_in_flight == 1, "one scrape at a time, each one ended"

            daemon.signal(signal.SIGTERM)
            started = time.monotonic()
            assert daemon.process.wait(timeout=10) == 0
            assert time.monotonic() - started < 3.0, "a stop does not wait for a slow page"


def _signals_json(config: Path) -> dict[str, Any]:
    """``vllm-governor signals --json`` as a user runs it, against the running daemon."""
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "signals", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        start_new_session=True,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def _own_metric(config: Path, name: str) -> float:
    port = tomllib.loads(config.read_text())["metrics"]["listen_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} is not among the daemon's metrics")


def test_pages_beyond_their_bounds_are_refused_and_the_watchdog_never_misses(
    short_tmp: Path,
) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    hostile = {
        # 200,000 distinct label values, 13 MB: parsed on the loop, about 5 s without a ping.
        "huge": (cardinality_bomb(page, 200_000), "larger than"),
        "crowded": (cardinality_bomb(page, 20_000), "max_page_samples"),
        "labelled": (cardinality_bomb(page, 3_000), "max_label_values"),
    }
    with ExitStack() as stack:
        healthy = stack.enter_context(FixtureExporter(Script(metrics=page)))
        servers = {
            name: stack.enter_context(FixtureExporter(Script(metrics=body)))
            for name, (body, _) in hostile.items()
        }
        extra = _instance("healthy", healthy.base_url) + "".join(
            _instance(name, server.base_url) for name, server in servers.items()
        )
        config = write_config(short_tmp, extra=extra, deadline_s=5.0)
        socket = short_tmp / "control.sock"
        daemon = stack.enter_context(running_daemon(config, watchdog_usec=WATCHDOG_USEC))
        daemon.wait_for("READY=1")
        with watching(daemon, "healthy") as watch:
            # The first scrapes (the huge page's included) count for the watchdog, not yet for
            # the healthy target's freshness.
            wait_until_fresh(socket, "healthy", timeout_s=15)
            end = time.monotonic() + WATCH_S / 2
            while time.monotonic() < end:
                watch.look(socket)
                time.sleep(0.5)
        print(watch.summary("pages beyond their bounds"))
        assert daemon.process.poll() is None
        assert len(watch.gaps) >= 5, "the watchdog was heard all along"
        watch.assert_healthy_served()
        answer = _signals_json(config)
        states = {entry["source"]: entry for entry in answer["sources"]}
        for name, (_, reason) in hostile.items():
            entry = states[f"vllm/{name}"]
            assert entry["state"] == "down", entry
            assert reason in (entry["last_error"] or ""), entry
        assert not [row for row in answer["signals"] if row["target"] in hostile and row["value"]]
        daemon.signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=10) == 0


def test_a_target_that_fills_the_store_neither_starves_a_healthy_one_nor_breaks_signals_json(
    short_tmp: Path,
) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    # 9,000 series of long label values: within the page's bounds (once the target allows that
    # many values of one label), more than the store holds, more than one reply can carry.
    bomb = cardinality_bomb(page, 9_000, pad=100)
    healthy_script = Script(metrics=page, metrics_status=503)  # not serving yet
    with FixtureExporter(healthy_script) as healthy, FixtureExporter(Script(metrics=bomb)) as bad:
        extra = (
            "[signals]\nmax_series = 4200\n"
            + _instance("healthy", healthy.base_url)
            + _instance("hostile", bad.base_url)
            + "max_label_values = 10000\n"
        )
        config = write_config(short_tmp, extra=extra, deadline_s=5.0)
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            deadline = time.monotonic() + 30
            while _own_metric(config, "vllm_governor_signal_samples_dropped") == 0:
                assert time.monotonic() < deadline, "the hostile target never filled its room"
                time.sleep(0.5)
            healthy_script.metrics_status = 200  # the healthy server comes up on a full store
            deadline = time.monotonic() + 20
            while _healthy_view(socket)[1] != "ok":
                assert time.monotonic() < deadline, (
                    f"the healthy target's signals were never stored: {_healthy_view(socket)}"
                )
                time.sleep(0.5)
            answer = _signals_json(config)
            assert daemon.process.poll() is None
        rows = answer["signals"]
        assert len(json.dumps(rows)) > (1 << 20), "the answer is larger than one reply"
        hostile_rows = [r for r in rows if r["target"] == "hostile" and r["name"] == "running"]
        assert len(hostile_rows) > 3_000
        identities = {
            (r["name"], r["target"], json.dumps(r["labels"], sort_keys=True)) for r in rows
        }
        assert len(identities) == len(rows), "each row once, across the pages"
        healthy_rows = [r for r in rows if r["target"] == "healthy" and r["name"] == "running"]
        assert any(row["state"] == "ok" for row in healthy_rows), healthy_rows
