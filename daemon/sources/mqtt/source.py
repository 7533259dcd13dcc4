"""The MQTT telemetry source: subscribe, map each message to samples, reconnect on its own.

A push source does not fit the polling runner, so it has a runner of its own with the same
health semantics: ``register`` before the first attempt, ``succeeded`` once connected and
subscribed, ``failed`` when a connection attempt fails or the connection drops (one log line
per state change, by :class:`~daemon.sources.health.HealthBoard`), and ``started()`` after the
first attempt whatever its outcome. aiomqtt has no reconnect of its own: the client is entered
again after jittered backoff. The session is clean, so messages published while the governor
is disconnected are not delivered; everything published after the resubscription is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiomqtt
from paho.mqtt.reasoncodes import ReasonCode

from daemon.core.backoff import Backoff
from daemon.core.clock import Clock
from daemon.core.errors import SourceError
from daemon.sources.health import HealthBoard
from daemon.sources.mqtt.broker import MqttBroker, MqttTlsError, translate
from daemon.sources.mqtt.inbox import Inbox
from daemon.sources.mqtt.payload_faults import PayloadFaults
from daemon.sources.mqtt.payloads import Rejection, read_value
from daemon.sources.mqtt.subscriptions import Subscription
from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore

log = logging.getLogger(__name__)

# Messages mapped in one go after a wake-up: a few milliseconds of work at most, so that a
# flood of telemetry cannot hold the event loop from the rest of the daemon.
BATCH = 100


@dataclass
class MqttStats:
    """Counters of the source since it started.

    Attributes:
        received: Messages taken off the connection.
        samples: Samples produced (a message may feed several subscriptions).
        unmatched: Messages no subscription matched (possible with overlapping sessions).
    """

    received: int = 0
    samples: int = 0
    unmatched: int = 0


class MqttSource:
    """Telemetry pushed over MQTT, mapped to samples per :class:`Subscription`."""

    name = "mqtt"

    def __init__(
        self,
        broker: MqttBroker,
        subscriptions: Sequence[Subscription],
        *,
        backoff: Backoff | None = None,
        quiet_s: float = 60.0,
        incoming_limit: int = 10_000,
    ) -> None:
        """Prepare the source; nothing connects before :meth:`run`.

        Args:
            broker: Where the broker is and how to authenticate.
            subscriptions: What to subscribe to and how to map it; at least one.
            backoff: Delays between reconnection attempts.
            quiet_s: How long without bad payloads before a subscription counts as clean again.
            incoming_limit: Messages buffered between the socket and the store; beyond that
                the oldest are dropped and counted in ``inbox.dropped``.
        """
        if not subscriptions:
            message = "the MQTT source needs at least one subscription"
            raise ValueError(message)
        self._broker = broker
        self._subscriptions = tuple(subscriptions)
        self._backoff = backoff or Backoff()
        self._incoming_limit = incoming_limit
        self._refused: frozenset[str] = frozenset()
        self.stats = MqttStats()
        self.faults = PayloadFaults(self._subscriptions, quiet_s)
        self.inbox = Inbox()

    async def run(
        self,
        store: SignalStore,
        health: HealthBoard,
        clock: Clock,
        started: Callable[[], None],
    ) -> None:
        """Receive forever; call ``started`` after the first attempt, whatever its outcome."""
        health.register(self.name, clock.monotonic())
        announced = False
        while True:
            try:
                async with self._broker.client(
                    "-sub", inbox=self.inbox, incoming_limit=self._incoming_limit
                ) as client:
                    detail = await self._subscribe(client)
                    health.succeeded(self.name, clock.monotonic(), detail)
                    self._backoff.reset()
                    if not announced:
                        started()
                        announced = True
                    await self._receive(client, store, clock)
                # aiomqtt's message iterator ends only by raising; should it ever just stop,
                # that is a lost connection too.
                error: SourceError = translate(aiomqtt.MqttError("connection closed"))
            except aiomqtt.MqttError as exc:
                error = translate(exc)
            except MqttTlsError as exc:
                error = exc
            health.failed(self.name, clock.monotonic(), str(error), error.detail)
            if not announced:
                started()
                announced = True
            await asyncio.sleep(self._backoff.next_delay())

    async def _subscribe(self, client: aiomqtt.Client) -> str:
        """Subscribe to every filter once (at the highest QoS asked); "partial" if refused."""
        qos_by_filter: dict[str, int] = {}
        for spec in self._subscriptions:
            qos_by_filter[spec.topic] = max(spec.qos, qos_by_filter.get(spec.topic, 0))
        filters = list(qos_by_filter.items())
        codes: Sequence[int | ReasonCode] = await client.subscribe(filters)
        refused = frozenset(
            topic for (topic, _), code in zip(filters, codes, strict=False) if _is_refusal(code)
        )
        if refused != self._refused:
            # Logged when the set changes, not at every reconnect.
            if refused:
                log.warning(
                    "mqtt subscriptions refused",
                    extra={"source": self.name, "topics": sorted(refused)},
                )
            else:
                log.info("mqtt subscriptions all granted", extra={"source": self.name})
            self._refused = refused
        return "partial" if refused else ""

    async def _receive(self, client: aiomqtt.Client, store: SignalStore, clock: Clock) -> None:
        async for message in client.messages:
            now = clock.monotonic()
            self.ingest(message.topic.value, _payload_bytes(message.payload), now, store)
            for waiting in self.inbox.take_waiting(BATCH):
                self.ingest(waiting.topic.value, _payload_bytes(waiting.payload), now, store)

    def ingest(self, topic: str, payload: bytes, now: float, store: SignalStore) -> None:
        """Map one message to samples and store them; never raises for a bad payload."""
        self.stats.received += 1
        parts = topic.split("/")
        matched = False
        for index, spec in enumerate(self._subscriptions):
            if not spec.matches(parts):
                continue
            matched = True
            value = read_value(payload, spec.field_path)
            if isinstance(value, Rejection):
                self.faults.reject(index, topic, value, now)
                continue
            self.faults.accept(index, now)
            key = SeriesKey(spec.signal, spec.labels_for(parts))
            store.add((Sample(key, value, now, self.name),))
            self.stats.samples += 1
        if not matched:
            self.stats.unmatched += 1


def _is_refusal(code: int | ReasonCode) -> bool:
    # MQTT 3.1.1 SUBACK return code 0x80 and MQTT 5 reason codes >= 0x80 mean "refused".
    return code.is_failure if isinstance(code, ReasonCode) else code >= 0x80


def _payload_bytes(payload: object) -> bytes:
    # Received payloads are bytes; aiomqtt's type also allows what one may *send* (str, numbers).
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return b"" if payload is None else str(payload).encode()
