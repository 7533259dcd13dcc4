"""The signals of the MQTT source: one per configured subscription's ``signal``.

Declared apart from the source (in ``daemon.sources.mqtt``) so that naming them costs no MQTT
client. A subscription with a ``key`` feeds a map keyed by that label of its topic
(``rack_inlet_temperature_celsius["3"]`` for ``key = "gpu"``); without one, a scalar: the one
series of the signal, or no data when its topics give several at once. Several
subscriptions may feed one signal, keyed alike.
"""

from __future__ import annotations

from daemon.core.settings import MqttSourceSection
from daemon.sources.declarations import SignalDeclaration, unit_of

SOURCE = "mqtt"


def declarations(section: MqttSourceSection) -> tuple[SignalDeclaration, ...]:
    """One declaration per subscription of ``section``, in order."""
    return tuple(
        SignalDeclaration(
            subscription.signal,
            SOURCE,
            subscription.help or f"MQTT: {subscription.topic}",
            subscription.unit or unit_of(subscription.signal),
            key=subscription.key or None,
        )
        for subscription in section.subscriptions
    )
