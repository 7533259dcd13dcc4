"""What answers at the Prometheus URL, beside a healthy vLLM target: the daemon is not harmed.

Part of the hostile-world suite (issue 15). A slowloris: before, each PromQL query ran in
asyncio's default thread pool, and requests' timeout is per read, so an answer trickled a byte
every half second never timed out: every poll the runner abandoned left a thread of that pool
blocked, and within seconds the pool (six threads on two cores) was full. Whatever else needed
it then waited: the resolution of a host name (a vLLM target at ``http://localhost:...`` went
down, "no answer within 1.5 s") and the stop of the daemon's own metrics server (exit 70). An
answer that never ends: before, it was read whole, and the daemon's memory grew without bound.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HostileServer, endless, trickle
from tests.support.hostile_watch import (
    WATCHDOG_USEC,
    peak_rss_mib,
    wait_until_fresh,
    watching,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PAGE = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
ANSWER = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
WATCH_S = 15.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def test_a_slowloris_prometheus_neither_blinds_a_target_named_by_host_nor_holds_the_stop(
    short_tmp: Path,
) -> None:
    slowloris = trickle(HEAD % len(ANSWER), ANSWER, bytes_per_s=2.0, slow_head=True)
    with FixtureExporter(Script(metrics=PAGE)) as healthy, HostileServer(slowloris) as hostile:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "http://localhost:{healthy.port}"\n'
            "[sources.prometheus]\nenabled = true\n"
            f'url = "{hostile.base_url}"\ninterval_s = 0.5\ntimeout_s = 1.0\n'
            'queries = { queue = "sum(queue)", busy = "sum(busy)" }\n'
        )
        config = write_config(short_tmp, extra=extra)
        socket = short_tmp / "control.sock"
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            wait_until_fresh(socket, "main")
            with watching(daemon, "main") as watch:
                end = time.monotonic() + WATCH_S
                while time.monotonic() < end:
                    watch.look(socket)
                    time.sleep(0.5)
            print(watch.summary("slowloris prometheus"))
            print(f"slowloris prometheus: {hostile.max_in_flight} connections at most at once")
            assert daemon.process.poll() is None
            watch.assert_healthy_served()
            sources = {s["source"]: s for s in call_daemon(socket, "status")["sources"]}
            assert sources["prometheus"]["state"] == "down", sources["prometheus"]
            # One query of each signal in flight at most, however many polls gave up on them.
            assert hostile.max_in_flight <= 2

            daemon.signal(signal.SIGTERM)
            started = time.monotonic()
            assert daemon.process.wait(timeout=15) == 0
            stop_s = time.monotonic() - started
            print(f"slowloris prometheus: stopped in {stop_s:.2f} s")


# The daemon at rest takes about 65 MiB; an instant query's answer is bounded well below this.
RSS_BOUND_MIB = 200


def test_an_endless_answer_at_the_prometheus_url_leaves_the_daemon_s_memory_bounded(
    short_tmp: Path,
) -> None:
    # Before: requests read the answer whole, and this one never ends: 370 MiB after 1 s,
    # 2.5 GiB after 8 s, growing by about 200 MiB a second.
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    with (
        FixtureExporter(Script(metrics=PAGE)) as healthy,
        HostileServer(endless(head, b'{"data": ' * 8192)) as hostile,
    ):
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "{healthy.base_url}"\n'
            "[sources.prometheus]\nenabled = true\n"
            f'url = "{hostile.base_url}"\ninterval_s = 0.5\ntimeout_s = 1.0\n'
            'queries = { queue = "sum(queue)" }\n'
        )
        config = write_config(short_tmp, extra=extra)
        socket = short_tmp / "control.sock"
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            wait_until_fresh(socket, "main")
            with watching(daemon, "main") as watch:
                end = time.monotonic() + WATCH_S
                while time.monotonic() < end:
                    watch.look(socket)
                    # Stop at once past the bound: unbounded, it would take the machine's memory.
                    assert peak_rss_mib(daemon.process.pid) < RSS_BOUND_MIB
                    time.sleep(0.5)
            print(watch.summary("endless prometheus"))
            assert daemon.process.poll() is None
            watch.assert_healthy_served()
            sources = {s["source"]: s for s in call_daemon(socket, "status")["sources"]}
            assert sources["prometheus"]["state"] == "down", sources["prometheus"]
            assert "larger than" in sources["prometheus"]["last_error"], sources["prometheus"]
            daemon.signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=15) == 0
