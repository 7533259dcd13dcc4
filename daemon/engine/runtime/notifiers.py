"""Where ``notify`` decisions go: one :class:`Notifier` per channel (``mqtt``, ``slack``).

The evaluator hands each tick's notify decisions to :meth:`Notifications.send`, which gives
every channel the decision named its text; a channel without a notifier (Slack not configured,
MQTT disabled) is logged and counted, never an error: a notification must not stop the
evaluator. Notifiers only queue (the MQTT publisher sends from its own task, through broker
outages), so sending never blocks a tick.

Channels are registered by the governor when it builds its planes: MQTT from the signal plane's
publisher (:class:`MqttNotifier`), Slack from the approvals plane where it exists
(:class:`SlackNotifier` over anything with ``notify(text, target)``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.policy.decisions import Decision

log = logging.getLogger(__name__)

EVENT_KIND = "notification"


class Notifier(Protocol):
    """One channel's sender."""

    def notify(self, text: str, decision: Decision) -> bool:
        """Queue ``text`` (the rendered message of ``decision``); False when it was dropped.

        Never blocks and never waits for the far end.
        """
        ...


class EventPublisher(Protocol):
    """What :class:`MqttNotifier` needs of the MQTT publisher."""

    def publish_event(self, kind: str, fields: Mapping[str, object]) -> None:
        """Queue one event on the governor's events topic."""
        ...


class TextSender(Protocol):
    """What :class:`SlackNotifier` needs of the approvals plane: a plain message to a channel."""

    async def notify(self, text: str, target: str = "") -> bool:
        """Send ``text`` about ``target``; False when it could not be sent."""
        ...


class MqttNotifier:
    """A ``notification`` event on ``<prefix>/events``, with the decision's evidence."""

    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher

    def notify(self, text: str, decision: Decision) -> bool:
        """Queue the event (the publisher sends it at least once, in order)."""
        evidence = decision.evidence
        self._publisher.publish_event(
            EVENT_KIND,
            {
                "policy": decision.policy,
                "target": decision.target,
                "text": text,
                "condition": evidence.condition,
                "signals": evidence.signals,
                "held_for_s": evidence.held_for_s,
            },
        )
        return True


class SlackNotifier:
    """The approvals plane's Slack sender, as a channel of notifications.

    Sending to Slack is a network call: :meth:`notify` only queues, and :meth:`task` (an
    eternal task the governor supervises) sends, one message at a time, in order. When the
    queue is full the newest message is dropped and logged: a storm of alerts must not grow
    the daemon's memory.
    """

    def __init__(self, sender: TextSender, queue_size: int = 100) -> None:
        self._sender = sender
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=queue_size)

    def notify(self, text: str, decision: Decision) -> bool:
        """Queue the text for the sending task; False when the queue is full."""
        try:
            self._queue.put_nowait((text, decision.target))
        except asyncio.QueueFull:
            return False
        return True

    def task(self) -> EternalTask:
        """The task that sends what :meth:`notify` queued."""
        return EternalTask("slack notifier", self._run)

    async def _run(self, readiness: Readiness) -> None:
        readiness.started()
        while True:
            text, target = await self._queue.get()
            try:
                sent = await self._sender.notify(text, target)
            except Exception:
                log.exception("sending a notification to Slack failed", extra={"target": target})
                continue
            if not sent:
                log.warning("Slack did not take a notification", extra={"target": target})


class Notifications:
    """The channels of ``notify`` actions, and the counts of what was sent or could not be."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._channels: dict[str, Notifier] = {}
        self._missing_said: set[str] = set()
        self._tasks: list[EternalTask] = []
        self._sent = Counter(
            "vllm_governor_notifications",
            "Notifications of notify actions, by channel and outcome.",
            ["channel", "outcome"],
            registry=registry,
        )

    def register(self, channel: str, notifier: Notifier, task: EternalTask | None = None) -> None:
        """Send ``channel``'s notifications through ``notifier``, whose ``task`` sends them."""
        self._channels[channel] = notifier
        if task is not None:
            self._tasks.append(task)

    def tasks(self) -> list[EternalTask]:
        """The sending tasks of the registered channels, for the supervisor."""
        return list(self._tasks)

    @property
    def channels(self) -> frozenset[str]:
        """The channels that have a notifier."""
        return frozenset(self._channels)

    def send(self, decisions: Sequence[Decision]) -> None:
        """Send each decision's text to each of its channels."""
        for decision in decisions:
            text = str(decision.details.get("text", ""))
            for channel in decision.details.get("channels", ()):
                self._send_one(channel, text, decision)

    def _send_one(self, channel: str, text: str, decision: Decision) -> None:
        notifier = self._channels.get(channel)
        if notifier is None:
            self._sent.labels(channel=channel, outcome="no_channel").inc()
            if channel not in self._missing_said:
                self._missing_said.add(channel)
                log.warning(
                    "a notification's channel is not configured; it is dropped",
                    extra={"channel": channel, "policy": decision.policy},
                )
            return
        try:
            queued = notifier.notify(text, decision)
        except Exception:
            # One broken channel must not keep the text from the others, nor stop the tick.
            self._sent.labels(channel=channel, outcome="error").inc()
            log.exception("sending a notification failed", extra={"channel": channel})
            return
        if not queued:
            self._sent.labels(channel=channel, outcome="dropped").inc()
            log.warning(
                "a notification was dropped: its channel's queue is full",
                extra={"channel": channel, "policy": decision.policy},
            )
            return
        self._sent.labels(channel=channel, outcome="queued").inc()
        log.info(
            "notification queued",
            extra={"channel": channel, "policy": decision.policy, "target": decision.target},
        )
