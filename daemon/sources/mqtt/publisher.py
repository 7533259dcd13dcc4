"""Publishing the governor's own events and state over MQTT, through broker outages.

Events (decisions, actions, approvals) go to ``<prefix>/events`` as JSON at QoS 1, in order.
The latest state goes to ``<prefix>/state``, retained, so a dashboard that connects later sees
it at once; ``<prefix>/availability`` is ``online`` (retained) while connected and the broker
publishes ``offline`` in our name if the connection dies (MQTT's last will).

Callers never wait for the broker: :meth:`MqttPublisher.publish_event` only queues. While the
broker is away events wait in a bounded queue; when it is full the oldest is dropped and
counted. An event leaves the queue only once the broker acknowledged it, so after a lost
connection it is sent again: delivery is at least once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Mapping

import aiomqtt

from daemon.core.backoff import Backoff
from daemon.core.clock import Clock
from daemon.core.errors import SourceError
from daemon.sources.mqtt.broker import MqttBroker, MqttTlsError, translate

log = logging.getLogger(__name__)

RESERVED_EVENT_KEYS = frozenset({"kind", "at"})
# How long a clean shutdown may spend saying "offline" before it gives up.
GOODBYE_TIMEOUT_S = 2.0


class MqttPublisher:
    """Sends events and retained state under a topic prefix; reconnects on its own."""

    def __init__(
        self,
        broker: MqttBroker,
        topic_prefix: str,
        clock: Clock,
        *,
        queue_size: int = 1000,
        backoff: Backoff | None = None,
    ) -> None:
        """Prepare the publisher; nothing connects before :meth:`run`.

        Args:
            broker: Where the broker is and how to authenticate.
            topic_prefix: Topics are ``<prefix>/events``, ``<prefix>/state`` and
                ``<prefix>/availability``; no wildcards (``vllm-governor/<host>``).
            clock: Stamps each event with the wall-clock time it happened, not when it was sent.
            queue_size: Events kept while the broker is away; beyond that the oldest go.
            backoff: Delays between reconnection attempts.
        """
        prefix = topic_prefix.strip("/")
        if not prefix or "+" in prefix or "#" in prefix:
            message = f"MQTT topic prefix {topic_prefix!r} must be non-empty, without + or #"
            raise ValueError(message)
        if queue_size < 1:
            message = "the MQTT event queue needs room for at least one event"
            raise ValueError(message)
        self._broker = broker
        self._clock = clock
        self._backoff = backoff or Backoff()
        self.events_topic = f"{prefix}/events"
        self.state_topic = f"{prefix}/state"
        self.availability_topic = f"{prefix}/availability"
        self._events: deque[bytes] = deque(maxlen=queue_size)
        self._state: bytes | None = None
        self._wake = asyncio.Event()
        self.connected: bool | None = None  # None until the first attempt
        self.dropped_events = 0
        self.sent_events = 0

    @property
    def pending_events(self) -> int:
        """Events queued and not yet acknowledged by the broker."""
        return len(self._events)

    def publish_event(self, kind: str, fields: Mapping[str, object]) -> None:
        """Queue an event ``{"kind", "at", **fields}``; returns at once.

        Raises:
            ValueError: ``fields`` uses a reserved key, or holds NaN or infinity (not JSON).
            TypeError: ``fields`` holds something JSON cannot carry.
        """
        clash = RESERVED_EVENT_KEYS & fields.keys()
        if clash:
            message = f"event fields may not use the reserved keys {sorted(clash)}"
            raise ValueError(message)
        event = {"kind": kind, "at": self._clock.wall().isoformat(), **fields}
        if len(self._events) == self._events.maxlen:
            self.dropped_events += 1  # the deque drops the oldest itself
        self._events.append(json.dumps(event, allow_nan=False).encode())
        self._wake.set()

    def set_state(self, state: Mapping[str, object]) -> None:
        """Replace the retained state; only the latest one is ever sent."""
        self._state = json.dumps(state, allow_nan=False, sort_keys=True).encode()
        self._wake.set()

    async def run(self, started: Callable[[], None]) -> None:
        """Publish forever; call ``started`` after the first attempt, whatever its outcome."""
        announced = False
        will = aiomqtt.Will(self.availability_topic, b"offline", qos=1, retain=True)
        while True:
            try:
                async with self._broker.client("-pub", will=will) as client:
                    await client.publish(self.availability_topic, b"online", qos=1, retain=True)
                    self._went_up()
                    if not announced:
                        started()
                        announced = True
                    await self._serve(client)
            except aiomqtt.MqttError as exc:
                error: SourceError = translate(exc)
            except MqttTlsError as exc:
                error = exc
            self._went_down(error)
            if not announced:
                started()
                announced = True
            await asyncio.sleep(self._backoff.next_delay())

    async def _serve(self, client: aiomqtt.Client) -> None:
        """Send until the connection drops (raising its MqttError) or the task is cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(_until_disconnected(client), name="mqtt publisher watch")
                group.create_task(self._send(client), name="mqtt publisher sender")
        except ExceptionGroup as failures:
            # Both tasks end only by raising; a lost connection is the run loop's business,
            # anything else is a bug and goes up as it is.
            lost = [e for e in failures.exceptions if isinstance(e, aiomqtt.MqttError)]
            if lost and len(lost) == len(failures.exceptions):
                raise lost[0] from None
            raise

    async def _send(self, client: aiomqtt.Client) -> None:
        try:
            while True:
                await self._flush(client)
                await self._wake.wait()
        except asyncio.CancelledError:
            await self._say_goodbye(client)
            raise

    async def _flush(self, client: aiomqtt.Client) -> None:
        # Clear before sending: anything queued while a publish awaits sets it again.
        self._wake.clear()
        while self._state is not None:
            state = self._state
            await client.publish(self.state_topic, state, qos=1, retain=True)
            if self._state is state:  # not replaced while it was in flight
                self._state = None
        while self._events:
            event = self._events[0]
            await client.publish(self.events_topic, event, qos=1)
            # Only now is it the broker's; unless it was dropped meanwhile to make room.
            if self._events and self._events[0] is event:
                self._events.popleft()
                self.sent_events += 1

    async def _say_goodbye(self, client: aiomqtt.Client) -> None:
        # A clean disconnect does not fire the last will, so say "offline" ourselves.
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            async with asyncio.timeout(GOODBYE_TIMEOUT_S):
                await client.publish(self.availability_topic, b"offline", qos=1, retain=True)

    def _went_up(self) -> None:
        self._backoff.reset()
        if self.connected is not True:
            log.info("mqtt publisher connected", extra={"topic": self.events_topic})
        self.connected = True

    def _went_down(self, error: SourceError) -> None:
        # One line per state change, like source health: an outage is two lines, not thousands.
        if self.connected is not False:
            log.warning(
                "mqtt publisher disconnected",
                extra={"error": str(error), "pending": self.pending_events},
            )
        self.connected = False


async def _until_disconnected(client: aiomqtt.Client) -> None:
    """Return never; raise MqttError when the connection drops, even while nothing is sent.

    The publisher subscribes to nothing, so the message iterator yields nothing: it serves only
    to notice the broker going away, so that the availability topic is restored on reconnect
    without waiting for the next event.
    """
    async for _message in client.messages:
        pass
