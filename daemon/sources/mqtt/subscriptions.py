"""What the MQTT source listens to, and how a topic becomes a signal's labels.

A :class:`Subscription` pairs an MQTT topic filter with a signal name. Labels come from topic
segments by position (0-based), so ``telemetry/+/gpu/+/temp`` with ``{"host": 1, "gpu": 3}``
turns ``telemetry/node7/gpu/2/temp`` into ``{host="node7", gpu="2"}``.

The raw topic is deliberately *not* a label: the labels already carry what varies in the
topic, and a ``#`` filter would otherwise give every distinct topic its own series, letting a
chatty topic tree fill the store. For the same reason every ``+`` must be labelled; otherwise
two devices would silently interleave their values in one series.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

from daemon.core.mqtt_topics import subscription_problems
from daemon.sources.samples import Labels


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """One topic filter mapped to one signal.

    Attributes:
        topic: MQTT topic filter, wildcards ``+`` (one segment) and ``#`` (the rest) allowed.
        signal: Name of the signal its messages feed.
        qos: Quality of service requested from the broker (0, 1 or 2).
        field: Dotted path to a number inside a JSON payload (``data.temp_c``; a segment of
            digits indexes a list); when empty the payload itself must be a plain number.
        labels: Label name to 0-based topic segment index.
        segments: The filter split at ``/`` (derived).
        field_path: ``field`` split at ``.`` (derived; empty for plain numbers).
    """

    topic: str
    signal: str
    qos: int = 0
    field: str = ""
    labels: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # Split once here rather than for every message.
    segments: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)
    field_path: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)
    _label_positions: tuple[tuple[str, int], ...] = dataclasses.field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # Freeze the labels too, so that a spec cannot change under a running source.
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "segments", tuple(self.topic.split("/")))
        object.__setattr__(self, "field_path", tuple(self.field.split(".")) if self.field else ())
        object.__setattr__(self, "_label_positions", tuple(sorted(self.labels.items())))
        problems = subscription_problems(self.topic, self.signal, self.qos, self.field, self.labels)
        if problems:
            message = f"subscription {self.topic!r}: " + "; ".join(problems)
            raise ValueError(message)

    def matches(self, topic: list[str]) -> bool:
        """Whether a topic (split at ``/``) matches this filter."""
        return topic_matches(self.segments, topic)

    def labels_for(self, topic: list[str]) -> Labels:
        """The labels of a matching topic, sorted; a segment beyond a ``#`` topic's end is ""."""
        size = len(topic)
        return tuple(
            (name, topic[index] if index < size else "") for name, index in self._label_positions
        )


def topic_matches(pattern: tuple[str, ...], topic: list[str]) -> bool:
    """MQTT filter matching, including the rule that wildcards never match ``$SYS``-style topics."""
    if topic and topic[0].startswith("$") and pattern and pattern[0] in {"+", "#"}:
        return False
    for index, part in enumerate(pattern):
        if part == "#":
            return True
        if index >= len(topic) or (part != "+" and part != topic[index]):
            return False
    return len(pattern) == len(topic)
