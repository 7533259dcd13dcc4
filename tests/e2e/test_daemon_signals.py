"""The daemon scraping a real HTTP server that plays vLLM, through outages."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"


def _eventually(check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


def _running(socket: Path) -> dict[str, Any]:
    answer = call_daemon(socket, "signals", prefix="running")
    rows = [r for r in answer["signals"] if r["target"] == "main" and "engine" not in r["labels"]]
    source = next(entry for entry in answer["sources"] if entry["source"] == "vllm/main")
    return {"row": rows[0] if rows else None, "source": source}


def _state(socket: Path) -> str | None:
    row = _running(socket)["row"]
    return None if row is None else str(row["state"])


def test_outage_makes_signals_stale_then_they_recover(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        instance = (
            '[[vllm]]\nname = "main"\n'
            f'url = "{exporter.base_url}"\n'
            "scrape_interval_s = 0.2\nscrape_timeout_s = 1.0\nstale_after_s = 1.0\n"
        )
        config = write_config(short_tmp, extra=instance)
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            fresh = _eventually(lambda: (s := _running(socket))["row"]["state"] == "ok" and s)
            assert fresh["row"]["state"] == "ok"
            assert fresh["row"]["source"] == "vllm/main"
            assert fresh["source"]["state"] == "up"

            exporter.stop()
            # A request cut off mid-answer reads "unreachable"; the refusals after it, "starting".
            down = _eventually(
                lambda: (
                    (s := _running(socket))["source"]["detail"] == "starting"
                    and s["row"]["state"] == "stale"
                    and s
                )
            )
            assert down["row"]["value"] is None, "stale data must never show a value"
            assert down["source"]["state"] == "down"
            assert daemon.process.poll() is None

            exporter.start()
            _eventually(lambda: _state(socket) == "ok")
            records = daemon.log_records()
            changes = [
                r["msg"]
                for r in records
                if r["msg"] in ("source up", "source down") and r["source"] == "vllm/main"
            ]
            # One line per state change, not per failed poll (dozens of polls failed meanwhile).
            assert changes[0] == changes[-1] == "source up", changes
            assert changes[1:-1] in (["source down"], ["source down", "source down"]), changes


def test_down_at_start_garbage_and_slow_answers_never_take_the_daemon_down(
    short_tmp: Path,
) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    exporter = FixtureExporter(Script(metrics=page))
    instance = (
        "[signals]\nwindow_s = 2.0\n"
        '[[vllm]]\nname = "main"\n'
        f'url = "{exporter.base_url}"\n'
        "scrape_interval_s = 0.2\nscrape_timeout_s = 0.5\nstale_after_s = 1.0\n"
    )
    config = write_config(short_tmp, extra=instance)
    socket = short_tmp / "control.sock"

    def source() -> dict[str, Any]:
        found: dict[str, Any] = _running(socket)["source"]
        return found

    with running_daemon(config) as daemon:
        # vLLM still loading when the governor starts: the daemon is ready all the same.
        daemon.wait_for("READY=1")
        assert _eventually(lambda: source()["detail"] == "starting")
        assert _running(socket)["row"]["state"] == "no_data", "nothing before the first scrape"
        with exporter:
            _eventually(lambda: _state(socket) == "ok")
            # Derived over the 2 s window: a counter that did not move is a real 0.
            rate = _eventually(
                lambda: [
                    row
                    for row in call_daemon(socket, "signals", prefix="preemptions_per_s")["signals"]
                    if row["state"] == "ok" and "engine" not in row["labels"]
                ]
            )
            assert rate[0]["value"] == 0.0

            exporter.script.metrics = b"<html>502 Bad Gateway</html>"
            _eventually(lambda: source()["detail"] == "unparsable")
            _eventually(lambda: _state(socket) == "stale")

            exporter.script.metrics = page
            exporter.script.delay_s = 2.0
            _eventually(lambda: source()["detail"] == "timeout")

            exporter.script.delay_s = 0.0
            _eventually(lambda: _state(socket) == "ok", timeout_s=40)
            assert daemon.process.poll() is None
