from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actuators.vllm.atomic_files import FileSnapshot
from actuators.vllm.freezes import freeze_reason
from actuators.vllm.plan import make_plan, render_plan
from actuators.vllm.preflight import preflight, refuse
from actuators.vllm.registry import V0_33
from daemon.api import ActuationRefused, ChangeRequest, Envelope, VllmInstance

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
YAML = Path("/etc/vllm/main.yaml")
ENV = Path("/etc/vllm/main.env")


def instance(**overrides: Any) -> VllmInstance:
    settings: dict[str, Any] = {
        "name": "main",
        "url": "http://127.0.0.1:8000",
        "unit": "vllm@main.service",
        "config_path": YAML,
        "env_file": ENV,
        "knobs": {
            "max_num_seqs": Envelope(min=32, max=512, max_step=128, min_dwell_s=600),
            "log_level": Envelope(min=10, max=40, max_step=30),
        },
        **overrides,
    }
    return VllmInstance(**settings)


def refusals(
    changes: dict[str, float],
    current: dict[str, float],
    yaml_text: str = "max-num-seqs: 256\nmax-num-batched-tokens: 8192\n",
    *,
    frozen: str = "",
    changed_at: dict[str, list[datetime]] | None = None,
) -> list[tuple[str, str]]:
    server = instance()
    request = ChangeRequest("main", "p", changes, current)
    plan = make_plan(
        server,
        request,
        V0_33,
        FileSnapshot(YAML, True, yaml_text, 0o644),
        FileSnapshot(ENV, True, "VLLM_LOGGING_LEVEL=INFO\n", 0o600),
    )
    return preflight(
        server, request, plan, V0_33, frozen=frozen, changed_at=changed_at or {}, now=NOW
    )


def test_a_change_inside_every_rule_passes() -> None:
    assert refusals({"max_num_seqs": 192, "log_level": 30}, {"max_num_seqs": 256}) == []
    drained = "max-num-seqs: 256\nshutdown-timeout: 30\n"
    assert refusals({"max_num_seqs": 192}, {"max_num_seqs": 256}, drained) == []


@pytest.mark.parametrize(
    ("kwargs", "guard"),
    [
        ({"changes": {"max_num_seqs": 16}}, "envelope"),
        ({"changes": {"max_num_seqs": 512}}, "envelope"),  # a step of 256 > max_step 128
        ({"current": {"max_num_seqs": 300}}, "stale"),
        ({"frozen": "frozen by /var/lib/vllm-governor/freeze"}, "frozen"),
        ({"changed_at": {"max_num_seqs": [NOW - timedelta(seconds=60)]}}, "knob_budget"),
        ({"changes": {"max_num_seqs": 256}}, "no_change"),
        ({"yaml_text": "max-num-seqs: 256\nmax-num-batched-tokens: 128\n"}, "registry"),
        ({"yaml_text": "max-num-seqs: 256\nmax-num-partial-prefills: 2\n"}, "registry"),
        ({"yaml_text": "max-num-seqs: 256\ndisable-log-stats: true\n"}, "registry"),
        ({"yaml_text": "model: m\n"}, "unknown_current_value"),
        # restart_timeout_s is 300 s by default: a longer drain would have the restart killed.
        ({"yaml_text": "max-num-seqs: 256\nshutdown-timeout: 300\n"}, "drain"),
    ],
)
def test_each_rule_refuses_before_anything_is_touched(kwargs: dict[str, Any], guard: str) -> None:
    arguments: dict[str, Any] = {"changes": {"max_num_seqs": 192}, "current": {"max_num_seqs": 256}}
    arguments.update(kwargs)
    found = refusals(**arguments)
    assert guard in [g for g, _ in found], found


def test_every_rule_a_change_breaks_is_a_refusal_of_its_own() -> None:
    # 1000 from 256: above the envelope's max (512), a step of 744 (max_step 128), and more
    # sequences than the step's token budget (128): three rules, three sentences.
    yaml_text = "max-num-seqs: 256\nmax-num-batched-tokens: 128\n"
    found = refusals({"max_num_seqs": 1000}, {"max_num_seqs": 256}, yaml_text)
    assert found == [
        (
            "registry",
            "max_num_batched_tokens (128) must be >= max_num_seqs (1000): vLLM would not start",
        ),
        ("envelope", "max_num_seqs=1000 is outside its envelope [32, 512]"),
        ("envelope", "max_num_seqs: a step of 744 exceeds max_step 128"),
    ]
    refused = refuse(found)
    assert (refused.guard, refused.refusals) == ("registry", tuple(found))


def test_a_knob_the_version_lacks_cannot_even_be_planned() -> None:
    with pytest.raises(ActuationRefused, match="no knob"):
        make_plan(
            instance(),
            ChangeRequest("main", "p", {"nonsense": 1}, {}),
            V0_33,
            FileSnapshot(YAML, True, "", 0o644),
            None,
        )


def test_the_log_level_needs_the_environment_file() -> None:
    with pytest.raises(ActuationRefused, match="env_file is not set"):
        make_plan(
            instance(env_file=None),
            ChangeRequest("main", "p", {"log_level": 30}, {}),
            V0_33,
            FileSnapshot(YAML, True, "", 0o644),
            None,
        )


def test_a_plan_shows_the_diffs_and_the_command() -> None:
    plan = make_plan(
        instance(),
        ChangeRequest("main", "kv-thrash", {"max_num_seqs": 192, "log_level": 30}, {}, "why"),
        V0_33,
        FileSnapshot(YAML, True, "max-num-seqs: 256\n", 0o644),
        FileSnapshot(ENV, True, "VLLM_LOGGING_LEVEL=INFO\n", 0o600),
    )
    text = render_plan(plan.as_json())
    assert "max_num_seqs: 256 -> 192" in text
    assert "-max-num-seqs: 256\n+max-num-seqs: 192" in text
    assert "-VLLM_LOGGING_LEVEL=INFO\n+VLLM_LOGGING_LEVEL=WARNING" in text
    assert 'then run (no shell): ["systemctl", "restart", "vllm@main.service"]' in text


def test_freeze_files_with_and_without_expiry(tmp_path: Path) -> None:
    assert freeze_reason(tmp_path, "main", NOW) == ""
    (tmp_path / "freeze.main").write_text("incident 4711\n")
    assert "freeze.main" in freeze_reason(tmp_path, "main", NOW)
    assert freeze_reason(tmp_path, "other", NOW) == ""
    (tmp_path / "freeze.main").write_text((NOW - timedelta(hours=1)).isoformat())
    assert freeze_reason(tmp_path, "main", NOW) == ""
    (tmp_path / "freeze").write_text((NOW + timedelta(hours=1)).isoformat())
    assert "until 2026-11-29T13:00:00+00:00" in freeze_reason(tmp_path, "other", NOW)
