"""The daemon as a real subprocess, talking sd_notify to a real datagram socket."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from daemon.core.errors import DaemonNotRunningError
from tests.support.daemon import governor_metrics, running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"


def test_ready_then_watchdog_pings_at_half_the_interval(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    with running_daemon(config, watchdog_usec=400_000) as daemon:
        ready = daemon.wait_for("READY=1")
        assert any(line.startswith("STATUS=ready") for line in ready.splitlines())
        pings_before = sum("WATCHDOG=1" in m.splitlines() for m in daemon.messages)
        # At 0.2 s per ping, 2 s must bring several pings; a generous bound, not a timing test.
        deadline = time.monotonic() + 2.0
        while (left := deadline - time.monotonic()) > 0:
            daemon.receive(left)
        pings = sum("WATCHDOG=1" in m.splitlines() for m in daemon.messages) - pings_before
        assert pings >= 3, daemon.messages
        assert daemon.process.poll() is None


def test_no_watchdog_task_without_watchdog_usec(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        status = call_daemon(short_tmp / "control.sock", "status")
        assert "watchdog pinger" not in status["tasks"]
        assert status["state"] == "ready"


def test_sighup_with_broken_config_keeps_running_and_says_where(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    good_text = config.read_text()
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        broken = good_text.replace("[logging]\n", "[logging]\nlevle = 'INFO'\n")
        config.write_text(broken)
        broken_line = broken.splitlines().index("levle = 'INFO'") + 1
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        reply = daemon.wait_for("READY=1")
        assert "reload rejected" in reply
        assert daemon.process.poll() is None
        status = call_daemon(short_tmp / "control.sock", "status")
        assert (
            f"{config}:{broken_line}:1: logging.levle: unknown key" in status["last_reload_error"]
        )
        rejected = [r for r in daemon.log_records() if r["msg"].startswith("reload rejected")]
        assert rejected, daemon.log_text()
        assert rejected[0]["where"].startswith(f"{config}:{broken_line}:1:")
        assert 'vllm_governor_config_reloads_total{outcome="rejected"} 1.0' in governor_metrics(
            good_text
        )

        config.write_text(good_text.replace('level = "DEBUG"', 'level = "INFO"'))
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        assert "reload rejected" not in daemon.wait_for("READY=1")
        status = call_daemon(short_tmp / "control.sock", "status")
        assert status["last_reload_error"] == ""
        assert 'vllm_governor_config_reloads_total{outcome="applied"} 1.0' in governor_metrics(
            good_text
        )


def test_sighup_that_changes_a_setting_read_at_start_is_refused_whole(short_tmp: Path) -> None:
    server = '[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:1"\n'
    config = write_config(short_tmp, extra=server)
    text = config.read_text()
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        loaded_at = call_daemon(short_tmp / "control.sock", "status")["config_loaded_at"]
        # A gate (the admission loop's runtime, built at start) and a new log level together.
        gated = text.replace('"DEBUG"', '"WARNING"') + "[vllm.gate]\nenabled = true\n"
        config.write_text(gated)
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        assert "reload rejected" in daemon.wait_for("READY=1")
        status = call_daemon(short_tmp / "control.sock", "status")
        assert f"{config}:0:0: vllm[main].gate: read once at start" in status["last_reload_error"]
        assert status["config_loaded_at"] == loaded_at, "nothing of the reload was applied"
        assert 'vllm_governor_config_reloads_total{outcome="rejected"} 1.0' in governor_metrics(
            text
        )


def test_sighup_moves_a_server_to_its_new_url_and_scrapes_it_from_then_on(
    short_tmp: Path,
) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with (
        FixtureExporter(Script(metrics=page)) as old,
        FixtureExporter(Script(metrics=page)) as new,
    ):
        server = f'[[vllm]]\nname = "main"\nurl = "{old.base_url}"\nscrape_interval_s = 0.5\n'
        config = write_config(short_tmp, extra=server)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            _wait(lambda: _scrapes(old) >= 2, "the first URL scraped")
            config.write_text(config.read_text().replace(old.base_url, new.base_url))
            daemon.signal(signal.SIGHUP)
            daemon.wait_for("RELOADING=1")
            assert "reload rejected" not in daemon.wait_for("READY=1")
            _wait(lambda: _scrapes(new) >= 2, "the new URL scraped")
            left_at = _scrapes(old)
            time.sleep(1.5)  # three scrape intervals: the old URL is asked no more
            assert _scrapes(old) == left_at
            status = call_daemon(short_tmp / "control.sock", "status")
            assert status["last_reload_error"] == ""
            [source] = [s for s in status["sources"] if s["source"] == "vllm/main"]
            assert source["state"] == "up"
            assert status["config_path"] == str(config)


def _scrapes(exporter: FixtureExporter) -> int:
    return sum(path == "/metrics" for path, _ in exporter.script.requests)


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_sigterm_stops_gracefully_with_status_zero_within_the_deadline(short_tmp: Path) -> None:
    deadline_s = 5.0
    config = write_config(short_tmp, deadline_s=deadline_s)
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        daemon.signal(signal.SIGTERM)
        daemon.wait_for("STOPPING=1")
        assert daemon.process.wait(timeout=deadline_s) == 0
        assert not (short_tmp / "control.sock").exists(), "the control socket is removed on stop"
        messages = [r["msg"] for r in daemon.log_records()]
        assert "governor stopped" in messages


def test_a_crashing_task_ends_the_daemon_non_zero(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    port = next(
        int(line.split("=")[1]) for line in config.read_text().splitlines() if "listen_port" in line
    )
    with socket.socket() as squatter:
        # The metrics endpoint cannot bind: its task crashes, and the daemon must not limp on.
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with running_daemon(config) as daemon:
            code = daemon.process.wait(timeout=20)
    assert code == 1, daemon.log_text()
    crashed = [r for r in daemon.log_records() if r["msg"] == "task crashed"]
    assert [record["task"] for record in crashed] == ["metrics endpoint"]
    assert "READY=1" not in "\n".join(daemon.messages)


def test_second_daemon_on_the_same_socket_refuses_to_start(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    with running_daemon(config) as first:
        first.wait_for("READY=1")
        second_dir = short_tmp / "second"
        second_dir.mkdir()
        second_config = second_dir / "config.toml"
        second_config.write_text(config.read_text().replace("listen_port = ", "listen_port = 0 #"))
        with running_daemon(second_config) as second:
            assert second.process.wait(timeout=20) == 1
        assert "another governor is already listening" in second.log_text()
        assert call_daemon(short_tmp / "control.sock", "status")["state"] == "ready"


def test_stale_socket_of_a_killed_daemon_is_reclaimed(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        daemon.signal(signal.SIGKILL)
        daemon.process.wait()
    assert (short_tmp / "control.sock").exists()
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        assert call_daemon(short_tmp / "control.sock", "status")["state"] == "ready"


def test_control_socket_is_owner_only(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        mode = (short_tmp / "control.sock").stat().st_mode & 0o777
        assert mode == 0o600


def test_status_without_a_daemon_says_so(short_tmp: Path) -> None:
    with pytest.raises(DaemonNotRunningError, match="no governor is running"):
        call_daemon(short_tmp / "control.sock", "status")
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "status", "--socket", str(short_tmp / "x.sock")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "no governor is running" in result.stderr


def test_run_with_broken_config_exits_78_naming_the_line(short_tmp: Path) -> None:
    config = write_config(short_tmp, extra="frmat = 'json'\n")
    line = config.read_text().splitlines().index("frmat = 'json'") + 1
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 78
    assert f"{config}:{line}:1: logging.frmat: unknown key" in result.stderr


def test_a_stop_that_overruns_its_deadline_ends_the_process_with_70() -> None:
    # A stuck stop cannot be provoked through the daemon's public surface, so the last-resort
    # timer is exercised on its own, in a process whose main thread is blocked for good.
    program = (
        "import logging, sys, time\n"
        "from daemon.app.logging_setup import configure_logging\n"
        "from daemon.app.commands.run import _arm_last_resort\n"
        "configure_logging('INFO', 'json')\n"
        "_arm_last_resort(0.3)\n"
        "time.sleep(30)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=20, check=False
    )
    assert result.returncode == 70
    assert "graceful stop exceeded its deadline" in result.stdout
