from __future__ import annotations

from pathlib import Path

from actuators.kinds import VLLM
from daemon.core.settings import VllmInstance
from daemon.engine.actuation.routing import Owner, route
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent

ACTUATED = VllmInstance(
    name="main", url="http://x", unit="vllm@main.service", config_path=Path("/etc/vllm/main.yaml")
)
OBSERVED = VllmInstance(name="obs", url="http://y")


def intent(
    target: str = "main", risk: str = "auto", policy: str = "p", operation: str | None = None
) -> Decision:
    return Decision(
        policy, target, 10.0, DecisionKind.INTENT,
        Evidence("waiting > 2.0", {"waiting": 5.0}, 30.0),
        Intent({"max_num_seqs": 16.0}, {"max_num_seqs": 8.0}, operation, risk),
    )  # fmt: skip


def test_intents_go_to_the_actuator_to_approval_or_are_blocked_with_a_reason() -> None:
    # The observed server has no config_path: the vLLM kind does not list it, nothing owns it.
    owners = {"main": Owner(VLLM, ACTUATED)}
    routing = route(
        [
            intent(),
            intent(risk="approval"),
            intent(target="obs"),
            intent(policy="bad"),
            intent(operation="restart"),
            intent(operation="reboot"),
        ],
        owners,
        {("bad", "main"): "its last change was reverted"},
    )
    [(server, request), (_, restart)] = routing.auto
    assert server.target is ACTUATED
    assert request.changes == {"max_num_seqs": 16.0}
    assert request.operation is None
    assert request.reason == "p: waiting > 2.0 held for 30 s"
    assert restart.operation == "restart"
    assert [proposal.risk for proposal in routing.proposals] == ["approval"]
    assert [(d.policy, d.target, d.guard) for d in routing.blocked] == [
        ("p", "obs", "not_actuated"),
        ("bad", "main", "quarantined"),
        ("p", "main", "not_actuated"),
    ]
    assert "no config_path" in routing.blocked[0].details["reason"]
    assert all(d.kind is DecisionKind.BLOCKED for d in routing.blocked)


def test_without_an_actuator_nothing_is_changed() -> None:
    routing = route([intent()], {}, {})
    assert routing.auto == []
    assert [d.guard for d in routing.blocked] == ["not_actuated"]
