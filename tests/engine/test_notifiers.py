"""Notifications reach each configured channel; a missing or broken one stops nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry

from daemon.engine.runtime.notifiers import MqttNotifier, Notifications, SlackNotifier
from daemon.engine.runtime.supervisor import EternalTask, Readiness, supervise
from daemon.policy.decisions import Decision, DecisionKind, Evidence


def note(text: str, channels: list[str]) -> Decision:
    evidence = Evidence("running > 10.0", {"running": 12.0}, 3.0)
    details = {"text": text, "channels": channels}
    return Decision("busy", "main", 1.0, DecisionKind.NOTIFY, evidence, details=details)


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Mapping[str, object]]] = []

    def publish_event(self, kind: str, fields: Mapping[str, object]) -> None:
        self.sent.append((kind, fields))


class Slack:
    def __init__(self, fail_first: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.fail_first = fail_first
        self.done = asyncio.Event()

    async def notify(self, text: str, target: str = "") -> bool:
        if self.fail_first:
            self.fail_first = False
            raise ConnectionError("slack is away")
        self.sent.append((text, target))
        self.done.set()
        return True


def counted(registry: CollectorRegistry, channel: str, outcome: str) -> float:
    labels = {"channel": channel, "outcome": outcome}
    return registry.get_sample_value("vllm_governor_notifications_total", labels) or 0.0


@pytest.mark.asyncio
async def test_each_channel_gets_the_text_and_a_missing_one_is_counted() -> None:
    registry = CollectorRegistry()
    notifications = Notifications(registry)
    events = Events()
    notifications.register("mqtt", MqttNotifier(events))
    notifications.send([note("main is busy", ["mqtt", "slack"]), note("again", ["slack"])])
    [(kind, fields)] = events.sent
    assert kind == "notification"
    assert fields["text"] == "main is busy"
    assert fields["signals"] == {"running": 12.0}
    assert counted(registry, "mqtt", "queued") == 1
    assert counted(registry, "slack", "no_channel") == 2


@pytest.mark.asyncio
async def test_slack_notifications_are_sent_by_their_own_task_in_order() -> None:
    registry = CollectorRegistry()
    notifications = Notifications(registry)
    slack = Slack(fail_first=True)
    notifier = SlackNotifier(slack, queue_size=2)
    notifications.register("slack", notifier, notifier.task())
    notifications.send([note(text, ["slack"]) for text in ("lost", "first", "dropped")])
    assert counted(registry, "slack", "queued") == 2
    assert counted(registry, "slack", "dropped") == 1, "the queue holds two"
    stop = asyncio.Event()

    async def stop_when_sent(readiness: Readiness) -> None:
        readiness.started()
        await slack.done.wait()
        stop.set()
        await asyncio.Event().wait()  # an eternal task: the stop cancels it

    tasks = [*notifications.tasks(), EternalTask("watcher", stop_when_sent)]
    await asyncio.wait_for(supervise(tasks, stop, on_ready=lambda: None), 10)
    assert slack.sent == [("first", "main")], "a failed send is logged, the next still goes"
