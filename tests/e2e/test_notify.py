"""A ``notify`` policy tells people over MQTT: one event per firing, with its evidence.

Real processes: the daemon, Mosquitto, and an HTTP server playing vLLM's ``/metrics`` whose
page the test switches between busy and calm. A listener on the governor's events topic counts
the ``notification`` events.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.mosquitto import Mosquitto
from tests.support.services import require_command

pytestmark = [pytest.mark.service("mosquitto"), pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
BUSY_PAGE = (FIXTURES / "v0.33-synthesized.txt").read_bytes()  # 12 running
CALM_PAGE = BUSY_PAGE.replace(
    b'model_name="Qwen/Qwen3-8B"} 12.0', b'model_name="Qwen/Qwen3-8B"} 2.0'
)
# The cooldown is far longer than the test holds a firing, so a second event within one firing
# would be a bug, and far shorter than the test waits between firings.
COOLDOWN_S = 6
POLICY = f"""\
name: busy-note
targets: [main]
when: running > 10.0
action:
  notify:
    text: "{{target}} runs {{running}} requests ({{policy}})"
    channels: [mqtt, slack]
cooldown: {COOLDOWN_S}s
"""
TOPIC = "fleet/notify-host/events"


def _config(directory: Path, broker: Mosquitto, exporter: FixtureExporter) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "busy-note.yaml").write_text(POLICY)
    extra = (
        f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
        "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n"
        "[sources.mqtt]\nenabled = true\n"
        f'host = "{broker.host}"\nport = {broker.port}\npublish_prefix = "fleet/notify-host"\n'
    )
    config = write_config(directory, extra=extra)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
    return config


def _decisions(socket: Path, kind: str) -> list[dict[str, Any]]:
    decisions = call_daemon(socket, "status")["recent_decisions"]
    return [d for d in decisions if d["policy"] == "busy-note" and d["kind"] == kind]


async def _until(check: Any, daemon: RunningDaemon, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := await asyncio.to_thread(check):
            return result
        assert daemon.process.poll() is None, daemon.log_text()[-4000:]
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s; log:\n{daemon.log_text()[-4000:]}")


async def _scenario(directory: Path, broker: Mosquitto, exporter: FixtureExporter) -> None:
    config = _config(directory, broker, exporter)
    socket = directory / "control.sock"
    events: list[dict[str, Any]] = []
    async with aiomqtt.Client(broker.host, broker.port) as client:
        await client.subscribe(TOPIC, qos=1)

        async def listen() -> None:
            async for message in client.messages:
                event = json.loads(bytes(message.payload))
                if event["kind"] == "notification":
                    events.append(event)

        listener = asyncio.create_task(listen())
        try:
            with running_daemon(config) as daemon:
                await asyncio.to_thread(daemon.wait_for, "READY=1")
                for firing in (1, 2):
                    exporter.script.metrics = BUSY_PAGE
                    await _until(lambda n=firing: len(events) >= n or None, daemon)
                    # Hold the firing for a good number of ticks: no second event may come.
                    await asyncio.sleep(1.5)
                    exporter.script.metrics = CALM_PAGE
                    await _until(
                        lambda n=firing: len(_decisions(socket, "resolved")) >= n or None, daemon
                    )
                    await asyncio.sleep(COOLDOWN_S)  # the next firing may notify again
                notes = _decisions(socket, "notify")
                fired = _decisions(socket, "fired")
                log = daemon.log_records()
        finally:
            listener.cancel()
    assert len(events) == len(fired) == len(notes) == 2, (events, fired, notes)
    event = events[0]
    assert event["text"] == "main runs 12 requests (busy-note)"
    assert (event["policy"], event["target"]) == ("busy-note", "main")
    assert event["signals"] == {"running": 12.0}
    assert event["condition"] == "running > 10.0"
    assert notes[0]["details"]["channels"] == ["mqtt", "slack"]
    # Slack is not configured here: said once, not an error, and MQTT still got every event.
    missing = [r for r in log if r["msg"].startswith("a notification's channel is not configured")]
    assert [r["channel"] for r in missing] == ["slack"]


def test_a_notify_policy_publishes_one_mqtt_event_per_firing(short_tmp: Path) -> None:
    (short_tmp / "broker").mkdir()
    with (
        FixtureExporter(Script(metrics=CALM_PAGE)) as exporter,
        Mosquitto(require_command("mosquitto"), short_tmp / "broker") as broker,
    ):
        asyncio.run(_scenario(short_tmp, broker, exporter))
