"""Rules for MQTT subscriptions: a topic filter, the signal it feeds, labels from its segments.

Checked where the configuration is validated and again where the source is built. Every
``+`` must be labelled (otherwise two devices would interleave their values in one series),
and every label must sit on a wildcard.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def subscription_problems(
    topic: str, signal: str, qos: int, field: str, labels: Mapping[str, int]
) -> list[str]:
    """Every problem of one subscription, in words; empty when it is usable."""
    problems = []
    segments = tuple(topic.split("/"))
    if not topic or "\0" in topic:
        problems.append("the topic filter is empty or holds a NUL")
    if not signal:
        problems.append("the signal name is empty")
    if qos not in {0, 1, 2}:
        problems.append(f"qos must be 0, 1 or 2, not {qos}")
    for index, part in enumerate(segments):
        if "#" in part and (part != "#" or index != len(segments) - 1):
            problems.append("'#' must be a whole segment and the last one")
        if "+" in part and part != "+":
            problems.append("'+' must be a whole segment")
    if field and not all(field.split(".")):
        problems.append(f"field {field!r} has an empty segment")
    problems.extend(_label_problems(labels, segments))
    return problems


def _label_problems(labels: Mapping[str, int], segments: tuple[str, ...]) -> list[str]:
    problems = []
    tail = segments.index("#") if "#" in segments else None
    for name, index in labels.items():
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            problems.append(f"label name {name!r} is not a valid Prometheus-style label name")
        wildcard = (0 <= index < len(segments) and segments[index] == "+") or (
            tail is not None and index >= tail
        )
        if not wildcard:
            problems.append(f"label {name!r} points at segment {index}, which is not a wildcard")
    labelled = set(labels.values())
    unlabelled = [index for index, part in enumerate(segments) if part == "+"]
    missing = [index for index in unlabelled if index not in labelled]
    if missing:
        problems.append(
            f"wildcard segment(s) {missing} have no label: messages of different topics would "
            "mix in one series"
        )
    return problems
