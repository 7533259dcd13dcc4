"""The daemon with MQTT and Prometheus configured, against real Mosquitto and Prometheus."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import governor_metrics, running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.mosquitto import Mosquitto
from tests.support.prometheus import Prometheus
from tests.support.services import require_command

pytestmark = [pytest.mark.service("mosquitto"), pytest.mark.service("prometheus")]


def _rows(socket: Path, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = call_daemon(socket, "signals", prefix=name)["signals"]
    return [row for row in rows if row["name"] == name]


def _eventually(check: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


async def _publish(broker: Mosquitto, topic: str, payload: bytes) -> None:
    async with aiomqtt.Client(broker.host, broker.port) as client:
        await client.publish(topic, payload, qos=1)


async def _first_event(broker: Mosquitto, topic: str) -> dict[str, Any]:
    async with aiomqtt.Client(broker.host, broker.port) as client:
        await client.subscribe(topic, qos=1)
        async with asyncio.timeout(20):
            async for message in client.messages:
                event: dict[str, Any] = json.loads(bytes(message.payload))
                return event
    raise AssertionError("no event")


def test_mqtt_telemetry_prometheus_queries_and_published_events(short_tmp: Path) -> None:
    exporter_page = b"# TYPE rack_queue gauge\nrack_queue 7\n"
    for directory in ("broker", "prom"):
        (short_tmp / directory).mkdir()
    with (
        FixtureExporter(Script(metrics=exporter_page)) as exporter,
        Mosquitto(require_command("mosquitto"), short_tmp / "broker") as broker,
        Prometheus(
            require_command("prometheus"), short_tmp / "prom", f"127.0.0.1:{exporter.port}"
        ) as prometheus,
    ):
        extra = (
            "[sources.prometheus]\nenabled = true\n"
            f'url = "{prometheus.url}"\ninterval_s = 0.5\n'
            'queries = { rack_queue_total = "sum(rack_queue)" }\n'
            "[sources.mqtt]\nenabled = true\n"
            f'host = "{broker.host}"\nport = {broker.port}\n'
            'publish_prefix = "fleet/test-host"\n'
            "[[sources.mqtt.subscriptions]]\n"
            'topic = "telemetry/+/inlet"\nsignal = "inlet_celsius"\nqos = 1\n'
            "labels = { rack = 1 }\n"
        )
        config = write_config(short_tmp, extra=extra)
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            # Listen before the daemon is ready, so its "started" event cannot be missed.
            event = asyncio.run(_listen_then_wait(broker, daemon))
            assert event["kind"] == "started"

            prom = _eventually(
                lambda: [r for r in _rows(socket, "rack_queue_total") if r["state"] == "ok"]
            )
            assert prom[0]["value"] == 7.0
            assert prom[0]["source"] == "prometheus"

            asyncio.run(_publish(broker, "telemetry/r12/inlet", b"24.5"))
            mqtt = _eventually(
                lambda: [r for r in _rows(socket, "inlet_celsius") if r["state"] == "ok"]
            )
            assert mqtt[0]["labels"] == {"rack": "r12"}
            assert mqtt[0]["value"] == 24.5
            # Every source says whether it is up, MQTT's connection too (the stale-source
            # alert reads this family).
            up = governor_metrics(config.read_text())
            for source in ("mqtt", "prometheus"):
                assert f'vllm_governor_source_up{{source="{source}"}}' in up, up
            assert 'vllm_governor_source_up{source="mqtt"} 1.0' in up
            assert daemon.process.poll() is None


async def _listen_then_wait(broker: Mosquitto, daemon: Any) -> dict[str, Any]:
    listener = asyncio.create_task(_first_event(broker, "fleet/test-host/events"))
    await asyncio.sleep(0.5)  # the subscription is in place before the daemon can publish
    await asyncio.to_thread(daemon.wait_for, "READY=1")
    return await listener
