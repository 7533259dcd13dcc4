from __future__ import annotations

import logging

import pytest

from daemon.sources.mqtt.payload_faults import PayloadFaults
from daemon.sources.mqtt.payloads import MAX_PAYLOAD_BYTES, Rejection, read_value
from daemon.sources.mqtt.subscriptions import Subscription, topic_matches


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("a/b", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/+/c", "a/x/c", True),
        ("a/+/c", "a//c", True),
        ("a/+", "a/x/c", False),
        ("a/#", "a", True),
        ("a/#", "a/x/y/z", True),
        ("#", "a/b", True),
        ("#", "$SYS/broker/load", False),
        ("+/broker", "$SYS/broker", False),
        ("$SYS/#", "$SYS/broker", True),
    ],
)
def test_topic_filters_match_as_mqtt_says(pattern: str, topic: str, matches: bool) -> None:
    assert topic_matches(tuple(pattern.split("/")), topic.split("/")) is matches


def test_labels_come_from_topic_segments_by_position() -> None:
    spec = Subscription("telemetry/+/gpu/+/temp", "t", labels={"host": 1, "gpu": 3})
    assert spec.labels_for(["telemetry", "node7", "gpu", "2", "temp"]) == (
        ("gpu", "2"),
        ("host", "node7"),
    )
    tail = Subscription("site/#", "t", labels={"room": 1, "rack": 2})
    assert tail.labels_for(["site", "r1"]) == (("rack", ""), ("room", "r1"))


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"topic": "a/b#"}, "'#' must be a whole segment"),
        ({"topic": "a/#/b"}, "the last one"),
        ({"topic": "a/b+", "labels": {}}, "'[+]' must be a whole segment"),
        ({"topic": "a/+"}, "have no label"),
        ({"topic": "a/+", "labels": {"x": 0}}, "not a wildcard"),
        ({"topic": "a/+", "labels": {"x": 1, "bad-name": 1}}, "not a valid"),
        ({"topic": "a", "qos": 3}, "qos must be"),
        ({"topic": "a", "field": "data..x"}, "empty segment"),
        ({"topic": ""}, "empty"),
    ],
)
def test_bad_subscriptions_are_refused_with_a_reason(
    kwargs: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        Subscription(signal="s", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "path", "expected"),
    [
        (b"42", (), 42.0),
        (b" -1.5e3\n", (), -1500.0),
        (b'{"data": {"temp_c": 61.5}}', ("data", "temp_c"), 61.5),
        (b'{"readings": [{"v": 1}, {"v": 2}]}', ("readings", "1", "v"), 2.0),
        (b"nan", (), Rejection.NOT_JSON),
        (b"NaN", (), Rejection.NOT_JSON),
        (b"1e400", (), Rejection.NOT_FINITE),
        (b"1" * 400, (), Rejection.NOT_FINITE),
        (b"true", (), Rejection.NOT_A_NUMBER),
        (b'"42"', (), Rejection.NOT_A_NUMBER),
        (b'{"v": 1}', (), Rejection.NOT_A_NUMBER),
        (b'{"v": 1}', ("w",), Rejection.FIELD_MISSING),
        (b"[1]", ("3",), Rejection.FIELD_MISSING),
        (b"\xff\xfe\xfd", (), Rejection.NOT_JSON),
        (b"", (), Rejection.NOT_JSON),
        (b" " * (MAX_PAYLOAD_BYTES + 1), (), Rejection.OVERSIZED),
    ],
)
def test_payloads_give_a_number_or_a_reason(
    payload: bytes, path: tuple[str, ...], expected: float | Rejection
) -> None:
    assert read_value(payload, path) == expected


def test_rejections_are_logged_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    faults = PayloadFaults((Subscription("a", "s"),), quiet_s=10)
    for now in (0.0, 1.0, 2.0):
        faults.reject(0, "a", Rejection.NOT_JSON, now)
        faults.accept(0, now + 0.5)  # a sane device in between does not end the episode
    faults.accept(0, 12.5)
    faults.reject(0, "a", Rejection.NOT_JSON, 13.0)
    assert faults.total == 4
    assert [r.getMessage() for r in caplog.records] == [
        "mqtt payloads rejected",
        "mqtt payloads accepted again",
        "mqtt payloads rejected",
    ]
