"""MQTT: telemetry in (a push source) and the governor's own events out.

Modules::

    broker.py          connection settings, TLS, client construction, error translation
    subscriptions.py   topic filter -> signal name, labels from topic segments (pure)
    payloads.py        plain number or JSON field -> float, or a Rejection (pure)
    payload_faults.py  rejected payloads counted, logged once per episode
    inbox.py           the bounded incoming queue (drops oldest), drained in batches
    source.py          MqttSource: subscribe, map, store, reconnect with backoff
    publisher.py       MqttPublisher: events (QoS 1, buffered) and retained state
"""

from __future__ import annotations

from daemon.sources.mqtt.broker import MqttBroker, MqttRejected, MqttTls, MqttTlsError
from daemon.sources.mqtt.publisher import MqttPublisher
from daemon.sources.mqtt.source import MqttSource, MqttStats
from daemon.sources.mqtt.subscriptions import Subscription

__all__ = [
    "MqttBroker",
    "MqttPublisher",
    "MqttRejected",
    "MqttSource",
    "MqttStats",
    "MqttTls",
    "MqttTlsError",
    "Subscription",
]
