"""The routing and the loader keep vLLM knobs and operations away from live log-level targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from actuators.kinds import HTTP_LOG_LEVEL
from daemon.core.errors import ConfigError
from daemon.core.http_log_level_settings import HttpLogLevelTarget
from daemon.engine.actuation.routing import Owner, route
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.policy.loading import load_policy

ENVOY = HttpLogLevelTarget(
    name="envoy", url="http://127.0.0.1:9901/logging?level={level}", levels={"ERROR": "error"}
)


def intent(changes: dict[str, float], risk: str = "auto", operation: str | None = None) -> Decision:
    return Decision(
        "p", "envoy", 1.0, DecisionKind.INTENT, Evidence("true", {}),
        Intent(changes, dict.fromkeys(changes, 20.0), operation, risk),
    )  # fmt: skip


def test_a_live_target_takes_log_level_alone() -> None:
    routing = route(
        [
            intent({"log_level": 40.0}),
            intent({"log_level": 40.0}, risk="approval"),
            intent({"log_level": 40.0, "max_num_seqs": 8.0}),
            intent({}, operation="restart"),
        ],
        {"envoy": Owner(HTTP_LOG_LEVEL, ENVOY)},
        {},
    )
    [(owner, request)] = routing.auto
    assert owner.kind is HTTP_LOG_LEVEL
    assert owner.target is ENVOY
    assert request.changes == {"log_level": 40.0}
    assert routing.proposals == []
    reasons = [d.details["reason"] for d in routing.blocked]
    assert reasons == [
        "envoy is a live log-level target: its changes run with risk auto, approvals are not "
        "supported there",
        "envoy is a live log-level target: it takes log_level only, not max_num_seqs",
        "envoy is a live log-level target: it takes log_level only, not operation restart",
    ]


def test_without_its_actuator_a_live_target_is_not_actuated() -> None:
    routing = route([intent({"log_level": 40.0})], {}, {})
    assert [d.guard for d in routing.blocked] == ["not_actuated"]


LEVEL = "name: p\ntargets: {targets}\nwhen: 'true'\naction: {{set: {{log_level: 40}}}}\n"


@pytest.mark.parametrize(
    ("targets", "risk"), [("[envoy]", "auto"), ("[envoy, main]", "approval"), ("['*']", "approval")]
)
def test_a_log_level_aimed_at_live_targets_alone_needs_no_approval(
    tmp_path: Path, targets: str, risk: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(LEVEL.format(targets=targets))
    spec = load_policy(path, frozenset({"main", "envoy"}), None, frozenset({"envoy"}))
    assert spec.action is not None
    assert spec.action.risk == risk


def test_a_vllm_knob_aimed_at_a_live_target_does_not_load(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(LEVEL.format(targets="[main, envoy]").replace("log_level", "max_num_seqs"))
    with pytest.raises(ConfigError) as caught:
        load_policy(path, frozenset({"main", "envoy"}), None, frozenset({"envoy"}))
    [issue] = caught.value.issues
    assert issue.render().endswith(
        "targets.1: envoy is a live log-level target: it takes log_level only, not max_num_seqs"
    )
