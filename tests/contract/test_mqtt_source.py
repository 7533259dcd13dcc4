"""The MQTT source and publisher against a real Mosquitto broker, restarted mid-test."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
import pytest_asyncio

from daemon.core.backoff import Backoff
from daemon.core.clock import SystemClock
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.mqtt import MqttBroker, MqttPublisher, MqttSource, MqttTls, Subscription
from daemon.sources.samples import SeriesKey
from daemon.sources.store import SignalStore
from tests.support.certificates import make_certificates
from tests.support.mosquitto import Mosquitto
from tests.support.services import require_command
from tests.support.tasks import eventually, leaked_tasks, running

pytestmark = [pytest.mark.service("mosquitto"), pytest.mark.asyncio]

TEMPERATURE = Subscription(
    "telemetry/+/gpu/+/temp",
    "gpu_temp_c",
    qos=1,
    field="data.temp_c",
    labels={"host": 1, "gpu": 3},
)
POWER = Subscription("power/+/watts", "power_w", qos=1, labels={"host": 1})


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task running (a reconnect loop that outlives its block)."""
    yield
    assert not await leaked_tasks()


@pytest.fixture
def broker(short_tmp: Path) -> Iterator[Mosquitto]:
    """A broker that is not started yet; always stopped at the end."""
    mosquitto = Mosquitto(require_command("mosquitto"), short_tmp)
    try:
        yield mosquitto
    finally:
        mosquitto.stop()


def _settings(
    broker: Mosquitto, client_id: str = "governor", tls: MqttTls | None = None
) -> MqttBroker:
    return MqttBroker(
        broker.host, broker.port, client_id=client_id, keepalive_s=5, timeout_s=3, tls=tls
    )


def _fast_backoff() -> Backoff:
    return Backoff(base_s=0.05, cap_s=0.2, rng=random.Random(0))


class Harness:
    """A source with its store and health board."""

    def __init__(
        self,
        broker: Mosquitto,
        *subscriptions: Subscription,
        quiet_s: float = 60,
        tls: MqttTls | None = None,
        client_id: str = "governor",
    ) -> None:
        self.store = SignalStore(points_per_series=256)
        self.health = HealthBoard()
        self.started = asyncio.Event()
        self.backoff = _fast_backoff()
        settings = _settings(broker, client_id, tls)
        self.source = MqttSource(settings, subscriptions, backoff=self.backoff, quiet_s=quiet_s)

    def run(self) -> Coroutine[Any, Any, None]:
        return self.source.run(self.store, self.health, SystemClock(), self.started.set)

    def state(self) -> SourceState | None:
        entry = self.health.get("mqtt")
        return entry.state if entry else None

    def values(self, name: str) -> dict[tuple[tuple[str, str], ...], list[float]]:
        return {
            key.labels: [value for _at, value in self.store.points(key)]
            for key in self.store.keys(name)
        }


async def _publish(broker: Mosquitto, *messages: tuple[str, bytes], retain: bool = False) -> None:
    async with aiomqtt.Client(broker.host, broker.port, identifier="test-device") as client:
        for topic, payload in messages:
            await client.publish(topic, payload, qos=1, retain=retain)


def _records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == message]


def _source_records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in _records(caplog, message) if getattr(r, "source", None) == "mqtt"]


async def test_messages_become_samples_labelled_from_topic_segments(broker: Mosquitto) -> None:
    broker.start()
    harness = Harness(broker, TEMPERATURE, POWER)
    async with running(harness.run(), "mqtt source") as task:
        await eventually(lambda: harness.state() is SourceState.UP, "connected", task=task)
        await _publish(
            broker,
            ("telemetry/node7/gpu/0/temp", b'{"data": {"temp_c": 61.5}, "unit": "C"}'),
            ("telemetry/node7/gpu/1/temp", b'{"data": {"temp_c": 70}}'),
            ("power/node7/watts", b"350.25"),
            ("unrelated/topic", b"1"),
        )
        await eventually(lambda: harness.source.stats.samples == 3, "three samples", task=task)
    assert harness.values("gpu_temp_c") == {
        (("gpu", "0"), ("host", "node7")): [61.5],
        (("gpu", "1"), ("host", "node7")): [70.0],
    }
    assert harness.values("power_w") == {(("host", "node7"),): [350.25]}
    sample_key = SeriesKey("power_w", (("host", "node7"),))
    assert harness.store.latest(sample_key) is not None
    assert harness.source.stats.received == 3, "only subscribed topics reach the source"
    assert harness.started.is_set()


async def test_bad_payloads_are_counted_and_logged_once_never_raised(
    broker: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    broker.start()
    harness = Harness(broker, TEMPERATURE, POWER, quiet_s=0)
    garbage = [
        ("telemetry/n1/gpu/0/temp", b"not json at all"),
        ("telemetry/n1/gpu/0/temp", b'{"data": {}}'),
        ("telemetry/n1/gpu/0/temp", b'{"data": {"temp_c": "hot"}}'),
        ("telemetry/n1/gpu/0/temp", b'{"data": {"temp_c": NaN}}'),
        ("telemetry/n1/gpu/0/temp", b'{"data": {"temp_c": true}}'),
        ("power/n1/watts", b"nan"),
        ("power/n1/watts", b"\xff\xfe\x00"),
        ("power/n1/watts", b'{"watts": 3}'),
    ]
    async with running(harness.run(), "mqtt source") as task:
        await eventually(lambda: harness.state() is SourceState.UP, "connected", task=task)
        await _publish(broker, *garbage)
        await eventually(lambda: harness.source.faults.total == len(garbage), "all rejected")
        await _publish(broker, ("telemetry/n1/gpu/0/temp", b'{"data": {"temp_c": 50}}'))
        await eventually(lambda: harness.source.stats.samples == 1, "the good one", task=task)
    assert harness.source.faults.rejected == [5, 3]
    assert harness.values("gpu_temp_c") == {(("gpu", "0"), ("host", "n1")): [50.0]}
    assert harness.values("power_w") == {}, "garbage is no data, never a zero"
    rejected = _records(caplog, "mqtt payloads rejected")
    assert [r.subscription for r in rejected] == [TEMPERATURE.topic, POWER.topic]  # type: ignore[attr-defined]
    accepted = _records(caplog, "mqtt payloads accepted again")
    assert [(r.subscription, r.rejected) for r in accepted] == [(TEMPERATURE.topic, 5)]  # type: ignore[attr-defined]
    assert harness.state() is SourceState.UP


async def test_a_broker_restart_is_survived_and_later_messages_all_arrive(
    broker: Mosquitto, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    broker.start()
    harness = Harness(broker, POWER)
    async with running(harness.run(), "mqtt source") as task:
        await eventually(lambda: harness.state() is SourceState.UP, "connected", task=task)
        await _publish(broker, ("power/n1/watts", b"-1"))
        await eventually(lambda: harness.source.stats.samples == 1, "before the restart")

        broker.stop()
        await eventually(lambda: harness.state() is SourceState.DOWN, "down", task=task)
        # Several reconnection attempts fail while the broker is away.
        await eventually(lambda: harness.backoff.failures >= 3, "retries", task=task)
        broker.start()
        await eventually(lambda: harness.state() is SourceState.UP, "reconnected", task=task)

        await _publish(broker, *[("power/n1/watts", str(n).encode()) for n in range(50)])
        await eventually(lambda: harness.source.stats.samples == 51, "every later message")
    assert harness.values("power_w") == {(("host", "n1"),): [-1.0, *map(float, range(50))]}
    assert len(_source_records(caplog, "source down")) == 1, "one line for the whole outage"
    assert len(_source_records(caplog, "source up")) == 2
    entry = harness.health.get("mqtt")
    assert entry is not None
    assert entry.last_error == ""
    assert harness.backoff.failures == 0


async def test_a_broker_down_at_start_is_waited_for(broker: Mosquitto) -> None:
    harness = Harness(broker, POWER)
    async with running(harness.run(), "mqtt source") as task:
        await asyncio.wait_for(harness.started.wait(), 10)
        entry = harness.health.get("mqtt")
        assert entry is not None
        assert (entry.state, entry.detail) == (SourceState.DOWN, "unreachable")
        assert "refused" in entry.last_error.lower()
        broker.start()
        await eventually(lambda: harness.state() is SourceState.UP, "connected", task=task)
        await _publish(broker, ("power/n1/watts", b"7"))
        await eventually(lambda: harness.source.stats.samples == 1, "a message", task=task)
    assert harness.values("power_w") == {(("host", "n1"),): [7.0]}


async def _receive(
    broker: Mosquitto, topic: str, count: int, *, identifier: str, clean: bool = True
) -> list[aiomqtt.Message]:
    """Connect as ``identifier``, subscribe to ``topic`` and collect ``count`` messages."""
    received: list[aiomqtt.Message] = []
    async with aiomqtt.Client(
        broker.host, broker.port, identifier=identifier, clean_session=clean
    ) as client:
        await client.subscribe(topic, qos=1)
        async with asyncio.timeout(15):
            async for message in client.messages:
                received.append(message)
                if len(received) == count:
                    break
    return received


async def test_the_publisher_queues_events_while_the_broker_is_away(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # Persistence keeps the watcher's session (and its queued messages) across the restart, so
    # what the publisher sends after reconnecting is delivered however the two race.
    broker = Mosquitto(require_command("mosquitto"), short_tmp, persistence=True)
    with broker:
        async with aiomqtt.Client(
            broker.host, broker.port, identifier="watcher", clean_session=False
        ) as watcher:
            await watcher.subscribe("vg/n1/events", qos=1)
        broker.stop()

        publisher = MqttPublisher(
            _settings(broker), "vg/n1/", SystemClock(), queue_size=3, backoff=_fast_backoff()
        )
        started = asyncio.Event()
        async with running(publisher.run(started.set), "mqtt publisher") as task:
            await asyncio.wait_for(started.wait(), 10)
            assert publisher.connected is False
            for n in range(5):
                publisher.publish_event("decision", {"n": n})
            assert (publisher.pending_events, publisher.dropped_events) == (3, 2)

            broker.start()
            await eventually(lambda: publisher.sent_events == 3, "the queue flushed", task=task)
            events = await _receive(broker, "vg/n1/events", 3, identifier="watcher", clean=False)
    bodies = [json.loads(bytes(message.payload)) for message in events]
    assert [body["n"] for body in bodies] == [2, 3, 4], "oldest dropped, order kept"
    assert all(body["kind"] == "decision" and body["at"] for body in bodies)
    assert len(_records(caplog, "mqtt publisher disconnected")) == 1
    assert len(_records(caplog, "mqtt publisher connected")) == 1


async def test_state_is_retained_and_availability_follows_the_publisher(broker: Mosquitto) -> None:
    broker.start()
    publisher = MqttPublisher(_settings(broker), "vg/n1", SystemClock(), backoff=_fast_backoff())
    async with running(publisher.run(lambda: None), "mqtt publisher") as task:
        await eventually(lambda: publisher.connected is True, "connected", task=task)
        publisher.set_state({"mode": "shadow", "policies": 3})
        publisher.set_state({"mode": "active", "policies": 3})
        live = await _receive(broker, "vg/n1/state", 1, identifier="live")
        assert json.loads(bytes(live[0].payload)) == {"mode": "active", "policies": 3}
    # Later readers get the retained state, and "offline" after a clean stop.
    late = await _receive(broker, "vg/n1/+", 2, identifier="late")
    retained = {str(message.topic): (bytes(message.payload), message.retain) for message in late}
    assert retained == {
        "vg/n1/state": (b'{"mode": "active", "policies": 3}', True),
        "vg/n1/availability": (b"offline", True),
    }


async def test_the_publisher_notices_a_restart_while_idle_and_says_online_again(
    broker: Mosquitto,
) -> None:
    broker.start()
    publisher = MqttPublisher(_settings(broker), "vg/n1", SystemClock(), backoff=_fast_backoff())
    async with running(publisher.run(lambda: None), "mqtt publisher") as task:
        await eventually(lambda: publisher.connected is True, "connected", task=task)
        broker.stop()  # no persistence: the retained "online" is gone with it
        await eventually(lambda: publisher.connected is False, "noticed", task=task)
        broker.start()
        await eventually(lambda: publisher.connected is True, "reconnected", task=task)
        (availability,) = await _receive(broker, "vg/n1/availability", 1, identifier="late")
    assert (bytes(availability.payload), availability.retain) == (b"online", True)


async def test_tls_verifies_the_broker_and_a_bad_setup_is_a_state_not_a_crash(
    short_tmp: Path,
) -> None:
    openssl = require_command("openssl")
    good = make_certificates(openssl, short_tmp / "certs", "good")
    stranger = make_certificates(openssl, short_tmp / "certs", "stranger")
    with Mosquitto(require_command("mosquitto"), short_tmp, tls=good) as broker:
        trusted = Harness(broker, POWER, tls=MqttTls(good.ca), client_id="trusted")
        untrusted = Harness(broker, POWER, tls=MqttTls(stranger.ca), client_id="untrusted")
        missing = MqttTls(short_tmp / "missing.pem")
        unreadable = Harness(broker, POWER, tls=missing, client_id="unreadable")
        async with (
            running(trusted.run(), "trusted") as task,
            running(untrusted.run(), "untrusted"),
            running(unreadable.run(), "unreadable"),
        ):
            await eventually(lambda: trusted.state() is SourceState.UP, "connected", task=task)
            async with aiomqtt.Client(
                broker.host, broker.port, tls_context=MqttTls(ca_file=good.ca).context()
            ) as device:
                await device.publish("power/n1/watts", b"5", qos=1)
            await eventually(lambda: trusted.source.stats.samples == 1, "a message over TLS")
            await asyncio.wait_for(untrusted.started.wait(), 10)
            await asyncio.wait_for(unreadable.started.wait(), 10)
    failures = {
        name: harness.health.get("mqtt")
        for name, harness in {"untrusted": untrusted, "unreadable": unreadable}.items()
    }
    assert {name: (h.state, h.detail) for name, h in failures.items() if h} == {
        "untrusted": (SourceState.DOWN, "unreachable"),
        "unreadable": (SourceState.DOWN, "tls"),
    }
    untrusted_health = failures["untrusted"]
    assert untrusted_health is not None
    assert "certificate verify failed" in untrusted_health.last_error
