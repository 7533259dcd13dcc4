"""The table of actuator kinds declares what each kind is, and each entry builds its actuator."""

from __future__ import annotations

from pathlib import Path

import pytest

from actuators.haproxy.actuator import HaproxyActuator
from actuators.http_log_level.actuator import HttpLogLevelActuator
from actuators.kinds import HAPROXY_GATE, HTTP_LOG_LEVEL, KINDS, VLLM
from actuators.vllm.actuator import VllmActuator
from daemon.api import ActuatorServices, SystemClock, no_gates
from daemon.core.settings import GovernorConfig, VllmInstance
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal


class NoWindows:
    def measure(self, target: str, window_s: float) -> dict[str, float | None]:
        return {}


def test_each_kind_declares_its_section_and_capabilities() -> None:
    assert [kind.name for kind in KINDS] == ["vllm", "http_log_level", "haproxy_gate"]
    assert [kind.section for kind in KINDS] == ["[[vllm]]", "[[http_log_level]]", "[vllm.gate]"]
    assert VLLM.capabilities.restart_required, "every vLLM knob is a startup flag"
    assert HTTP_LOG_LEVEL.capabilities.live
    assert HAPROXY_GATE.capabilities.live
    assert all(kind.capabilities.journals and kind.capabilities.revertible for kind in KINDS)
    assert VLLM.operations == frozenset({"restart"})
    assert VLLM.knobs is None, "the vLLM actuator's preflight knows its knobs per version"
    assert HTTP_LOG_LEVEL.knobs == frozenset({"log_level"})
    assert HAPROXY_GATE.knobs == frozenset({"gate_cap"})
    # Policies' intents go to the first two; the admission loop moves the gate's cap.
    assert [kind.name for kind in KINDS if kind.routed] == ["vllm", "http_log_level"]


def test_each_entry_builds_its_actuator_from_what_the_engine_lends(tmp_path: Path) -> None:
    clock = SystemClock()
    journal = SqliteJournal(tmp_path / "state.sqlite3", clock)
    caps = SqliteCapJournal(tmp_path / "state.sqlite3", clock)
    services = ActuatorServices(journal, NoWindows(), clock, tmp_path, no_gates, caps=caps)
    try:
        built = [kind.factory(services) for kind in KINDS]
        assert [type(actuator) for actuator in built] == [
            VllmActuator,
            HttpLogLevelActuator,
            HaproxyActuator,
        ]
        without_caps = ActuatorServices(journal, NoWindows(), clock, tmp_path, no_gates)
        with pytest.raises(TypeError, match="cap journal"):
            HAPROXY_GATE.factory(without_caps)  # a missing link fails when it is built
    finally:
        caps.close()
        journal.close()


def test_a_kind_lists_the_targets_it_changes_from_its_section() -> None:
    config = GovernorConfig(
        vllm=(
            VllmInstance(
                name="main",
                url="http://x",
                unit="vllm@main.service",
                config_path=Path("/etc/vllm/main.yaml"),
            ),
            VllmInstance(name="watched", url="http://y"),
            VllmInstance.model_validate(
                {"name": "gated", "url": "http://z", "gate": {"enabled": True}}
            ),
        )
    )
    assert [instance.name for instance in VLLM.targets(config)] == ["main"]
    assert list(HTTP_LOG_LEVEL.targets(config)) == []
    assert [instance.name for instance in HAPROXY_GATE.targets(config)] == ["gated"]
