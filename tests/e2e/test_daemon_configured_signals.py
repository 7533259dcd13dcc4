"""Policies on configured signals, in the daemon, against real Prometheus and Mosquitto.

The signals a policy reads are declared by their sources: here a PromQL query (a scalar, and
a map keyed by a label) and two MQTT subscriptions (a scalar, and a map keyed by a topic
label). A condition that fails at run time is an error state, never a crash: the CEL budget
case below made the daemon exit 1 at its first evaluation before.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.mosquitto import Mosquitto
from tests.support.prometheus import Prometheus
from tests.support.services import require_command

pytestmark = [pytest.mark.service("mosquitto"), pytest.mark.service("prometheus")]

EXPORTER_PAGE = b'# TYPE rack_queue gauge\nrack_queue{rack="a"} 7\nrack_queue{rack="b"} 1\n'
HUNDRED = "[" + ", ".join(str(i) for i in range(100)) + "]"
POLICIES = {
    "promql-scalar": "when: rack_queue_total > 5.0",
    "promql-map": 'when: queue_by_rack["a"] > 5.0 && queue_by_rack["b"] < 5.0',
    "mqtt-scalar": "when: hall_celsius > 30.0",
    "mqtt-map": 'when: inlet_by_rack["r12"] > 30.0',
    # check accepts it (without data the guard is no data and the loops never run); with
    # data it runs 100 x 100 steps, past CEL's budget.
    "loops": f"when: 'rack_queue_total > 5.0 ? {HUNDRED}.all(i, {HUNDRED}.all(j, i + j >= 0))"
    " : false'",
}


def _config(short_tmp: Path, prometheus: Prometheus, broker: Mosquitto, vllm_url: str) -> Path:
    extra = (
        f'[[vllm]]\nname = "main"\nurl = "{vllm_url}"\n'
        "[sources.prometheus]\nenabled = true\n"
        f'url = "{prometheus.url}"\ninterval_s = 0.5\n'
        'queries = { rack_queue_total = "sum(rack_queue)", '
        'queue_by_rack = { query = "sum by (rack) (rack_queue)", key = "rack" } }\n'
        "[sources.mqtt]\nenabled = true\n"
        f'host = "{broker.host}"\nport = {broker.port}\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "hall/temperature"\nsignal = "hall_celsius"\nqos = 1\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "telemetry/+/inlet"\nsignal = "inlet_by_rack"\nqos = 1\n'
        'labels = { rack = 1 }\nkey = "rack"\n'
    )
    config = write_config(short_tmp, extra=extra)
    policies = short_tmp / "policies"
    policies.mkdir()
    for name, when in POLICIES.items():
        (policies / f"{name}.yaml").write_text(f"name: {name}\ntargets: [main]\n{when}\n")
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.3\n"))
    return config


def _targets(socket: Path) -> dict[str, dict[str, Any]]:
    status = call_daemon(socket, "status")
    return {p["name"]: p["targets"].get("main", {}) for p in status["policies"]}


def _eventually(check: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


async def _publish(broker: Mosquitto, messages: dict[str, bytes]) -> None:
    async with aiomqtt.Client(broker.host, broker.port) as client:
        for topic, payload in messages.items():
            await client.publish(topic, payload, qos=1, retain=True)


def _metric(port: int, name: str, policy: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        page = response.read().decode()
    found = re.search(rf'^{name}{{policy="{policy}"}} (\S+)$', page, re.MULTILINE)
    return None if found is None else float(found.group(1))


def test_policies_fire_on_promql_and_mqtt_signals_and_an_error_is_a_state(
    short_tmp: Path,
) -> None:
    for directory in ("broker", "prom"):
        (short_tmp / directory).mkdir()
    with (
        FixtureExporter(Script(metrics=EXPORTER_PAGE)) as exporter,
        Mosquitto(require_command("mosquitto"), short_tmp / "broker") as broker,
        Prometheus(
            require_command("prometheus"), short_tmp / "prom", f"127.0.0.1:{exporter.port}"
        ) as prometheus,
    ):
        # Retained, so that the daemon reads them whenever it subscribes.
        asyncio.run(_publish(broker, {"hall/temperature": b"31.5", "telemetry/r12/inlet": b"33.0"}))
        config = _config(short_tmp, prometheus, broker, exporter.base_url)
        port = int(re.findall(r"listen_port = (\d+)", config.read_text())[0])
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            firing = {"promql-scalar", "promql-map", "mqtt-scalar", "mqtt-map"}
            targets = _eventually(
                lambda: (
                    (t := _targets(socket))
                    and all(t[name].get("phase") == "firing" for name in firing)
                    and t.get("loops", {}).get("state") == "error"
                    and t
                )
            )
            assert "iteration budget exceeded" in targets["loops"]["error"]
            assert targets["loops"]["phase"] == "inactive"  # it holds
            explained = call_daemon(socket, "explain", policy="loops")["targets"]["main"]
            assert explained["result"] == "error"
            assert _metric(port, "vllm_governor_policy_errors", "loops") == 1.0
            assert _metric(port, "vllm_governor_policy_errors", "mqtt-map") == 0.0

            # A reload that brings another such policy keeps the daemon up as well.
            (short_tmp / "policies" / "loops2.yaml").write_text(
                (short_tmp / "policies" / "loops.yaml").read_text().replace("loops", "loops2")
            )
            daemon.signal(signal.SIGHUP)
            _eventually(lambda: _targets(socket).get("loops2", {}).get("state") == "error")
            assert daemon.process.poll() is None
            failures = [
                r
                for r in daemon.log_records()
                if r.get("msg", "").startswith("policy evaluation failed")
            ]
            assert {r.get("policy") for r in failures} == {"loops", "loops2"}
            decisions = call_daemon(socket, "status")["recent_decisions"]
            assert ("loops", "error") in {(d["policy"], d["kind"]) for d in decisions}
