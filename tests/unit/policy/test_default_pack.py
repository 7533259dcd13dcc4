"""The default policy pack (policies/): it loads, it is documented, and its policy tests pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from daemon.core.config_files import load_config
from daemon.core.yaml_documents import load_located_yaml
from daemon.policy.loading import load_policies, policy_files
from daemon.policy.spec import NoData, PolicySpec
from daemon.policy.testing.runner import find_test_files, render_failure, run_file

ROOT = Path(__file__).resolve().parents[3]
PACK = ROOT / "policies"
TESTS = PACK / "tests"
COOKBOOK = ROOT / "docs" / "cookbook.md"
ACTIVE_FIXTURE = TESTS / "fixtures" / "maintenance-window-active.yaml"


def _pack() -> tuple[PolicySpec, ...]:
    targets = [instance.name for instance in load_config(ROOT / "config.example.toml").vllm]
    loaded = load_policies([PACK], targets)
    assert [issue.render() for issue in loaded.issues] == []
    return loaded.specs


def test_every_pack_file_loads_against_the_example_config() -> None:
    files, problems = policy_files([PACK])
    specs = _pack()
    assert problems == []
    assert len(specs) == len(files) >= 7
    assert sorted(Path(spec.source).stem for spec in specs) == sorted(spec.name for spec in specs)


def test_every_policy_has_a_test_file_and_a_cookbook_section() -> None:
    cookbook = COOKBOOK.read_text(encoding="utf-8")
    sections = set(re.findall(r"^## `([a-z0-9_-]+)`$", cookbook, flags=re.MULTILINE))
    for spec in _pack():
        assert (TESTS / f"{spec.name}.test.yaml").is_file(), f"{spec.name} has no test file"
        assert spec.name in sections, f"docs/cookbook.md has no '## `{spec.name}`' section"
    assert (TESTS / "pack.test.yaml").is_file()


def test_pack_defaults_are_conservative() -> None:
    for spec in _pack():
        assert spec.on_no_data is NoData.HOLD, f"{spec.name} may act without fresh data"
        action = spec.action
        assert action is not None, f"{spec.name} does nothing"
        if action.vetoes:
            continue
        if action.admission is not None:
            # The live lever: no restart, so no window or approval; bounded and never shadowed
            # away by accident (it steers only a gate the operator configured).
            assert action.admission.min_cap >= 1, f"{spec.name} may close the gate"
            assert action.admission.interval_s >= 1, f"{spec.name} steps faster than the gate"
            assert not action.changes, f"{spec.name} mixes the live lever with a restart"
            continue
        # Every change of the pack restarts vLLM: automatic only inside a window, in shadow.
        if action.risk == "auto":
            assert spec.windows, f"{spec.name} acts automatically at any time"
            assert spec.shadow, f"{spec.name} restarts vLLM unattended without an opt-in"
        assert spec.cooldown_s >= 30 * 60, f"{spec.name} may restart vLLM more than twice an hour"
        assert 1 <= spec.budget_per_hour <= 2


def test_the_active_fixture_is_the_pack_file_but_for_its_mode() -> None:
    shipped = dict(load_located_yaml(PACK / "maintenance-window.yaml").data)
    active = dict(load_located_yaml(ACTIVE_FIXTURE).data)
    assert (shipped.pop("mode"), active.pop("mode")) == ("shadow", "active")
    assert shipped == active


def _test_files() -> list[Path]:
    files, problems = find_test_files([TESTS])
    assert problems == []
    return files


@pytest.mark.parametrize("path", _test_files(), ids=lambda path: path.name)
def test_pack_policy_tests_pass(path: Path) -> None:
    result = run_file(path)
    report = [issue.render() for issue in result.issues]
    for case in result.cases:
        for failure in case.failures:
            report.extend([f"{case.name}:", *render_failure(failure)])
    assert result.cases, f"{path.name} has no tests"
    assert result.passed, "\n".join(report)
