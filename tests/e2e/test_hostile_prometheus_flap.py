"""A Prometheus that keeps dying beside a healthy vLLM target: no stale data is acted on.

Part of the hostile-world suite (issue 15). A real Prometheus, queried by the daemon for a
PromQL signal a policy reads, is killed (SIGKILL) and started again :data:`CYCLES` times, down
for :data:`DOWN_S` seconds each time, up for :data:`UP_S`. The daemon never exits and keeps its
watchdog on time; its Prometheus source goes down with the reason and comes back up; while
Prometheus is down the PromQL signal turns stale and the policy reading it is ``no_data``, never
true on the last value seen; the vLLM target beside it stays fresh throughout.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon, call_daemon_paged
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_watch import WATCHDOG_USEC, Watch, wait_until_fresh, watching
from tests.support.prometheus import Prometheus
from tests.support.services import require_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PAGE = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
RACKS = b'# TYPE rack_queue gauge\nrack_queue{rack="a"} 7\n'
CYCLES = 5
DOWN_S = 2.0
UP_S = 2.0
STALE_AFTER_S = 1.0  # the PromQL signal's; it polls every 0.25 s
POLICY = "name: queued\ntargets: [main]\nwhen: rack_queue_total > 5.0\n"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150), pytest.mark.service("prometheus")]


@dataclass(frozen=True)
class Look:
    """One look at the daemon while Prometheus was up or down."""

    cycle: int
    prometheus_up: bool
    source: dict[str, Any]
    signal: dict[str, Any] | None
    policy: dict[str, Any]


def _config(short_tmp: Path, prometheus: Prometheus, vllm_url: str) -> Path:
    extra = (
        f'[[vllm]]\nname = "main"\nurl = "{vllm_url}"\n'
        "[sources.prometheus]\nenabled = true\n"
        f'url = "{prometheus.url}"\ninterval_s = 0.25\ntimeout_s = 0.5\n'
        f"stale_after_s = {STALE_AFTER_S}\n"
        'queries = { rack_queue_total = "sum(rack_queue)" }\n'
    )
    config = write_config(short_tmp, extra=extra)
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "queued.yaml").write_text(POLICY)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.25\n"))
    return config


def _look(socket: Path, cycle: int, prometheus_up: bool) -> Look:
    answer = call_daemon_paged(socket, "signals", "signals", prefix="rack_queue_total")
    source = next(entry for entry in answer["sources"] if entry["source"] == "prometheus")
    rows = [row for row in answer["signals"] if row["name"] == "rack_queue_total"]
    policy = call_daemon(socket, "explain", policy="queued")["targets"]["main"]
    return Look(cycle, prometheus_up, source, rows[0] if rows else None, policy)


def _flap(socket: Path, prometheus: Prometheus, watch: Watch) -> list[Look]:
    """Kill and restart Prometheus CYCLES times, looking at the daemon as it goes."""
    looks: list[Look] = []

    def look_for(seconds: float, cycle: int, prometheus_up: bool) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            watch.look(socket)
            looks.append(_look(socket, cycle, prometheus_up))
            time.sleep(0.25)

    for cycle in range(CYCLES):
        prometheus.kill()
        look_for(DOWN_S, cycle, prometheus_up=False)
        prometheus.start(wait_for_scrape=False)  # its data survives: a query answers at once
        look_for(UP_S, cycle, prometheus_up=True)
    return looks


def _judge_outage(looks: list[Look], url: str) -> None:
    """While Prometheus was dead: its source down with the reason, no stale value read."""
    assert looks, "the outage was looked at"
    assert any(look.source["state"] == "down" for look in looks), looks[-1].source
    for look in looks:
        if look.source["state"] == "down":
            # Refused, or reset when the kill cut a query short: unreachable either way.
            assert look.source["detail"] == "unreachable", look.source
            assert look.source["last_error"].startswith(f"{url}: "), look.source
    stale = [look for look in looks if look.signal is None or look.signal["state"] != "ok"]
    assert stale, "the outage outlasted the signal's stale_after_s"
    for look in stale:
        assert look.signal is None or look.signal["value"] is None, look.signal
        # Read after the signal (a second call): just as stale, so no data, never true.
        assert look.policy["result"] == "no_data", look.policy
        assert look.policy["signals"] == {"rack_queue_total": None}, look.policy


def _fresh_again(look: Look) -> bool:
    return (
        look.source["state"] == "up"
        and look.signal is not None
        and look.signal["state"] == "ok"
        and look.policy["result"] == "true"
    )


def test_a_flapping_prometheus_never_has_the_daemon_act_on_stale_data(short_tmp: Path) -> None:
    (short_tmp / "prom").mkdir()
    with (
        FixtureExporter(Script(metrics=PAGE + RACKS)) as exporter,
        Prometheus(
            require_command("prometheus"), short_tmp / "prom", f"127.0.0.1:{exporter.port}"
        ) as prometheus,
    ):
        config = _config(short_tmp, prometheus, exporter.base_url)
        socket = short_tmp / "control.sock"
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            wait_until_fresh(socket, "main")
            with watching(daemon, "main") as watch:
                looks = _flap(socket, prometheus, watch)
            print(watch.summary("flapping prometheus"))
            assert daemon.process.poll() is None
            watch.assert_healthy_served()
            for cycle in range(CYCLES):
                down = [look for look in looks if look.cycle == cycle and not look.prometheus_up]
                up = [look for look in looks if look.cycle == cycle and look.prometheus_up]
                _judge_outage(down, prometheus.url)
                # Back up, with the PromQL signal fresh and read again.
                assert any(_fresh_again(look) for look in up), up[-1]
            decisions = call_daemon(socket, "status")["recent_decisions"]
            kinds = [d["kind"] for d in decisions if d["policy"] == "queued"]
            # It fired once, at the start: no outage resolved it or had it fire again.
            assert kinds == ["fired"], decisions
            daemon.signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=10) == 0
