"""docs/policies.md stays in step with the code: fields, signals, knobs, kinds and examples."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from daemon.core.knobs import KNOBS
from daemon.policy.decisions import DecisionKind
from daemon.policy.schemas import policy_schema, policy_test_schema
from daemon.policy.testing.models import EXTRA_KINDS
from daemon.policy.testing.runner import render_failure, run_file
from daemon.sources.registry import BUILTIN

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = (ROOT / "docs" / "policies.md").read_text()
QUOTED = set(re.findall(r"`([^`\s]+)`", REFERENCE))


def fields(schema: dict[str, Any]) -> set[str]:
    """Every property name of the schema and of its nested definitions."""
    definitions = [schema, *schema.get("$defs", {}).values()]
    return {name for definition in definitions for name in definition.get("properties", {})}


@pytest.mark.parametrize(
    ("what", "names"),
    [
        ("policy file field", fields(policy_schema())),
        ("policy test file field", fields(policy_test_schema())),
        ("signal", set(BUILTIN.names())),
        ("knob", set(KNOBS)),
        ("decision kind", {kind.value for kind in DecisionKind} | set(EXTRA_KINDS)),
    ],
)
def test_the_reference_names_every(what: str, names: set[str]) -> None:
    missing = sorted(names - QUOTED)
    assert missing == [], f"docs/policies.md does not mention these {what}s: {missing}"


def blocks(language: str) -> list[str]:
    """The bodies of the fenced code blocks written in ``language`` ("" for plain ones)."""
    found: list[str] = []
    body: list[str] = []
    open_language: str | None = None
    for line in REFERENCE.splitlines(keepends=True):
        if line.startswith("```") and open_language is None:
            open_language, body = line[3:].strip(), []
        elif line.startswith("```"):
            if open_language == language:
                found.append("".join(body))
            open_language = None
        else:
            body.append(line)
    return found


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The reference's kv-thrash policy and its test file, as a pack on disk."""
    policy = next(b for b in blocks("yaml") if b.startswith("# policies/kv-thrash.yaml"))
    test = next(b for b in blocks("yaml") if b.startswith("# policies/tests/"))
    (tmp_path / "kv-thrash.yaml").write_text(policy)
    (tmp_path / "tests").mkdir()
    path = tmp_path / "tests" / "kv-thrash.test.yaml"
    path.write_text(test)
    return path


def test_the_example_test_file_passes(example: Path) -> None:
    result = run_file(example)
    assert result.issues == ()
    assert [failure for case in result.cases for failure in case.failures] == []


def test_the_example_report_is_what_the_runner_prints(example: Path) -> None:
    text = example.read_text()
    wrong = "{policy: kv-thrash, target: main, kind: intent, set: {max_num_seqs: 192}}"
    example.write_text(
        text.replace(wrong, wrong.replace("target: main, ", "").replace("192", "128"))
    )
    result = run_file(example)
    (case,) = result.cases
    printed = [f"FAIL {example}: {case.name}"]
    printed += [line for failure in case.failures for line in render_failure(failure)]
    printed += ["0 passed, 1 failed"]
    report = next(b for b in blocks("") if b.startswith("FAIL "))
    assert (
        "\n".join(printed).replace(str(example), "policies/tests/kv-thrash.test.yaml") + "\n"
        == report
    )
