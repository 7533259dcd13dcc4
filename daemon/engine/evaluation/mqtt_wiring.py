"""MQTT from the configuration: the broker's settings, the telemetry source, the publisher."""

from __future__ import annotations

import socket
from pathlib import Path

from daemon.core.clock import Clock
from daemon.core.secrets import GovernorSecrets
from daemon.core.settings import MqttSourceSection
from daemon.sources.mqtt.broker import MqttBroker, MqttTls
from daemon.sources.mqtt.publisher import MqttPublisher
from daemon.sources.mqtt.source import MqttSource
from daemon.sources.mqtt.subscriptions import Subscription


def broker_of(section: MqttSourceSection, secrets: GovernorSecrets) -> MqttBroker:
    """Connection settings; the password comes from the secrets, never the file."""
    tls = None
    if section.tls_ca_file or section.tls_cert_file:
        tls = MqttTls(
            ca_file=Path(section.tls_ca_file) if section.tls_ca_file else None,
            cert_file=Path(section.tls_cert_file) if section.tls_cert_file else None,
            key_file=Path(section.tls_key_file) if section.tls_key_file else None,
        )
    return MqttBroker(
        host=section.host,
        port=section.port,
        client_id=section.client_id or f"vllm-governor-{socket.gethostname()}",
        username=section.username or None,
        password=secrets.mqtt_password,
        tls=tls,
        keepalive_s=section.keepalive_s,
        timeout_s=section.timeout_s,
    )


def mqtt_source(section: MqttSourceSection, broker: MqttBroker) -> MqttSource | None:
    """The telemetry source, or None when nothing is subscribed."""
    if not section.subscriptions:
        return None
    subscriptions = [
        Subscription(s.topic, s.signal, s.qos, s.field, dict(s.labels))
        for s in section.subscriptions
    ]
    return MqttSource(broker, subscriptions, incoming_limit=section.incoming_limit)


def mqtt_publisher(section: MqttSourceSection, broker: MqttBroker, clock: Clock) -> MqttPublisher:
    """The publisher of the governor's events and retained state."""
    prefix = section.publish_prefix or f"vllm-governor/{socket.gethostname()}"
    return MqttPublisher(broker, prefix, clock, queue_size=section.publish_queue_size)
