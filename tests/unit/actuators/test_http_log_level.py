"""The log-level target's configuration, the request it sends, its read-back, its preflight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from actuators.http_log_level.preflight import preflight
from actuators.http_log_level.wire import level_in, level_request
from daemon.api import ActuationRefused, ChangeRequest, HttpLogLevelTarget
from daemon.core.settings import GovernorConfig, VllmInstance

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ENVOY_WORDS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "ERROR": "error"}


def target(**overrides: Any) -> HttpLogLevelTarget:
    settings: dict[str, Any] = {
        "name": "envoy",
        "url": "http://127.0.0.1:9901/logging?level={level}",
        "levels": ENVOY_WORDS,
        "knob": {"min": 20, "max": 40, "max_step": 20, "min_dwell_s": 600},
        **overrides,
    }
    return HttpLogLevelTarget.model_validate(settings)


def test_a_level_becomes_the_configured_word_and_nothing_else() -> None:
    sent = level_request(target(), 40.0)
    assert (sent.method, sent.url, sent.body) == (
        "POST",
        "http://127.0.0.1:9901/logging?level=error",
        b"",
    )
    in_body = target(url="http://h/log", method="PUT", body='{"level": "{level}"}')
    assert level_request(in_body, 10.0).body == b'{"level": "debug"}'
    with pytest.raises(ActuationRefused, match="does not allow log level 10"):
        level_request(target(levels={"INFO": "info", "ERROR": "error"}), 10.0)
    with pytest.raises(ActuationRefused):
        level_request(target(), 25.0)


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"levels": {"ERROR": "error&level=trace"}}, "String should match pattern"),
        ({"levels": {"LOUD": "trace"}}, "Input should be 'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
        ({"url": "http://h/logging?level={level}&logger={logger}"}, "{logger} is not substituted"),
        ({"url": "http://h/logging"}, "{level} must appear exactly once"),
        ({"url": "http://{level}/logging"}, "may not be part of the URL's host"),
        ({"url": "http://h/{level}"}, "set read_url to read it back"),
        ({"url": "file:///etc/passwd?{level}"}, "must be an http:// or https:// URL"),
    ],
)
def test_no_string_from_outside_the_allowed_set_can_reach_a_url(
    overrides: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem.replace("{", r"\{").replace("(", r"\(")):
        target(**overrides)


def test_the_read_back_is_a_level_only_when_every_logger_agrees() -> None:
    envoy = target()
    assert envoy.reading_url() == "http://127.0.0.1:9901/logging"
    agree = "active loggers:\n  admin: warning\n  http: warning\n"
    assert level_in(envoy, agree) == 30.0
    assert level_in(envoy, agree + "  router: debug\n") is None
    assert level_in(envoy, "active loggers:\n  admin: trace\n") is None, "not an allowed word"
    assert level_in(target(read_format="plain"), "INFO\n") == 20.0


def refusals(
    changes: dict[str, float],
    in_force: float | None = 20.0,
    *,
    current: float = 20.0,
    changed_minutes_ago: tuple[float, ...] = (),
    operation: str | None = None,
) -> list[str]:
    request = ChangeRequest("envoy", "p", changes, {"log_level": current}, operation=operation)
    found = preflight(
        target(),
        request,
        in_force=in_force,
        frozen="",
        changed_at=[NOW - timedelta(minutes=m) for m in changed_minutes_ago],
        now=NOW,
    )
    return [guard for guard, _ in found]


def test_preflight_checks_the_knob_the_envelope_staleness_and_pace() -> None:
    assert refusals({"log_level": 40}) == []
    assert refusals({"max_num_seqs": 8}) == ["not_actuated"]
    assert refusals({"log_level": 40, "max_num_seqs": 8}) == ["not_actuated"]
    assert refusals({}, operation="restart") == ["not_actuated"]
    assert refusals({"log_level": 40}, None) == ["unknown_current_value"]
    assert refusals({"log_level": 10}) == ["envelope"]
    assert refusals({"log_level": 40}, 30.0, current=20.0) == ["stale"]
    assert refusals({"log_level": 20}) == ["no_change"]
    assert refusals({"log_level": 40}, changed_minutes_ago=(5,)) == ["knob_budget"]


def test_live_targets_are_targets_with_a_log_level_envelope_and_unique_names() -> None:
    config = GovernorConfig(
        vllm=(VllmInstance(name="main", url="http://x"),), http_log_level=(target(),)
    )
    assert config.target_names() == ["main", "envoy"]
    assert config.live_target_names() == ["envoy"]
    assert config.envelopes()[("envoy", "log_level")].max_step == 20
    with pytest.raises(ValidationError, match="target names must be unique"):
        GovernorConfig(
            vllm=(VllmInstance(name="envoy", url="http://x"),), http_log_level=(target(),)
        )
