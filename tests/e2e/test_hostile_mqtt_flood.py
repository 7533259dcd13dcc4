"""An MQTT flood beside a healthy vLLM target: the daemon stays up, bounded, and on time.

Part of the hostile-world suite (issue 15). A publisher floods a real Mosquitto for
:data:`FLOOD_S` seconds, as fast as it can up to :data:`RATE` messages a second, on the topics
the daemon subscribes to: most on one scalar topic, a share on ever new topics under a
wildcard subscription (each a new series: a cardinality bomb over MQTT), some garbage, and some
payloads of a megabyte. The daemon keeps pinging its watchdog in time, its memory stays bounded, the MQTT
source holds no more series than its quota, and the vLLM target beside it stays fresh.
"""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from daemon.app.control_client import call_daemon, call_daemon_paged
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_watch import WATCHDOG_USEC, wait_until_fresh, watching
from tests.support.mosquitto import Mosquitto
from tests.support.services import require_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PAGE = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
RATE = 20_000
FLOOD_S = 10.0
QUOTA = 300  # signals.max_series_per_source
OVERSIZED = b"[" + b"1," * (512 << 10) + b"1]"  # a megabyte of JSON, 16 times the bound
GARBAGE = b"\x1b[2J\xff\xfe not a reading"
# The daemon's memory at rest is about 60 MiB; the store's budget at QUOTA series per source is
# a few MiB, and the incoming queue holds messages, not bytes (see the report at the bottom).
RSS_BOUND_MIB = 250

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.service("mosquitto")]


@dataclass
class Flood:
    """What the publisher sent."""

    messages: int = 0
    topics: int = 0
    oversized: int = 0
    garbage: int = 0
    seconds: float = 0.0


def _flood(broker: Mosquitto, stop: threading.Event, sent: Flood) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="flood")
    client.max_queued_messages_set(10_000)
    client.connect(broker.host, broker.port)
    client.loop_start()
    started = time.monotonic()
    try:
        while not stop.is_set() and (elapsed := time.monotonic() - started) < FLOOD_S:
            # Keep to RATE a second: publish what is due, then yield a tick.
            due = int(elapsed * RATE) - sent.messages
            for _ in range(min(due, 2_000)):
                n = sent.messages
                if n % 500 == 0:
                    client.publish("flood/hall/reading", OVERSIZED)
                    sent.oversized += 1
                elif n % 7 == 0:
                    client.publish("flood/value", GARBAGE)
                    sent.garbage += 1
                elif n % 4 == 0:
                    client.publish(f"flood/device-{sent.topics}/reading", b"1.5")
                    sent.topics += 1
                else:
                    client.publish("flood/value", str(n % 1000).encode())
                sent.messages += 1
            time.sleep(0.005)
        sent.seconds = time.monotonic() - started
    finally:
        client.loop_stop()
        client.disconnect()


def _config(short_tmp: Path, broker: Mosquitto, vllm_url: str) -> Path:
    extra = (
        f"[signals]\nmax_series_per_source = {QUOTA}\n"
        f'[[vllm]]\nname = "healthy"\nurl = "{vllm_url}"\n'
        "[sources.mqtt]\nenabled = true\n"
        f'host = "{broker.host}"\nport = {broker.port}\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "flood/value"\nsignal = "flood_value"\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "flood/+/reading"\nsignal = "reading_by_device"\n'
        'labels = { device = 1 }\nkey = "device"\n'
    )
    return write_config(short_tmp, extra=extra)


def _own_metric(config: Path, name: str) -> float:
    port = re.findall(r"listen_port = (\d+)", config.read_text())[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        found = re.search(rf"^{name} (\S+)$", answer.read().decode(), re.MULTILINE)
    assert found is not None, f"{name} is not among the daemon's metrics"
    return float(found.group(1))


def test_an_mqtt_flood_leaves_the_daemon_bounded_on_time_and_the_vllm_target_fresh(
    short_tmp: Path,
) -> None:
    (short_tmp / "broker").mkdir()
    with (
        FixtureExporter(Script(metrics=PAGE)) as healthy,
        Mosquitto(require_command("mosquitto"), short_tmp / "broker") as broker,
    ):
        config = _config(short_tmp, broker, healthy.base_url)
        socket = short_tmp / "control.sock"
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            wait_until_fresh(socket, "healthy")
            sent = Flood()
            stop = threading.Event()
            publisher = threading.Thread(target=_flood, args=(broker, stop, sent), daemon=True)
            with watching(daemon, "healthy") as watch:
                publisher.start()
                try:
                    while publisher.is_alive():
                        watch.look(socket)
                        time.sleep(0.5)
                finally:
                    stop.set()
                    publisher.join(timeout=30)
                for _ in range(4):  # and just after, while the daemon drains what came in
                    watch.look(socket)
                    time.sleep(0.5)
            print(watch.summary("mqtt flood"))
            print(
                f"mqtt flood: sent {sent.messages} messages in {sent.seconds:.1f} s"
                f" ({sent.messages / sent.seconds:.0f}/s), {sent.topics} distinct topics,"
                f" {sent.oversized} payloads of {len(OVERSIZED) >> 10} KiB, {sent.garbage} of garbage"
            )
            assert daemon.process.poll() is None
            watch.assert_healthy_served()
            assert watch.peak_rss_mib < RSS_BOUND_MIB

            mqtt_rows = [
                row
                for row in call_daemon_paged(socket, "signals", "signals", prefix="")["signals"]
                if row["source"] == "mqtt"
            ]
            assert sent.topics > QUOTA
            assert QUOTA / 2 < len(mqtt_rows) <= QUOTA, "the MQTT source fills its quota, no more"
            assert _own_metric(config, "vllm_governor_signal_samples_dropped") > 0
            flood_value = [row for row in mqtt_rows if row["name"] == "flood_value"]
            assert [row["state"] for row in flood_value] == ["ok"], flood_value
            # The megabyte payloads are refused unparsed, the garbage refused too, and each said
            # once for its subscription, not once a message.
            refusals = {
                record.get("subscription"): record.get("reason")
                for record in daemon.log_records()
                if record.get("msg") == "mqtt payloads rejected"
            }
            assert refusals == {
                "flood/+/reading": "payload larger than 64 KiB",
                "flood/value": "payload is not UTF-8 JSON or a plain number",
            }, refusals
            lines = [line for line in daemon.log_text().splitlines() if "payloads rejected" in line]
            assert len(lines) == 2, lines
            sources = {s["source"]: s for s in call_daemon(socket, "status")["sources"]}
            assert sources["mqtt"]["state"] == "up", sources["mqtt"]
            assert "Traceback" not in daemon.log_text()

            daemon.signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=10) == 0
