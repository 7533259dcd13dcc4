"""``vllm-governor test`` and ``schema`` as a user runs them: exit codes and what they print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.app.cli import main
from daemon.policy.schemas import policy_schema, policy_test_schema

POLICY = """\
name: kv-thrash
when: preemptions_per_s > 0.5 && ttft_p95_s > 2.0
for: 2m
action:
  set: {max_num_seqs: "math.greatest(current * 0.75, 32.0)"}
  risk: approval
cooldown: 30m
"""
TEST = """\
policies: [../kv-thrash.yaml]
targets:
  main:
    knobs: {max_num_seqs: 256}
    envelopes:
      max_num_seqs: {min: 32, max: 1024, max_step: 256}
tests:
  - name: thrashing for two minutes proposes fewer sequences
    series:
      main:
        preemptions_per_s: "2x30"
        ttft_p95_s: "5x30"
    approvals:
      - {at: 3m, policy: kv-thrash, answer: approve}
    expect:
      - at: 2m
        decisions:
          - {policy: kv-thrash, kind: fired}
          - {policy: kv-thrash, kind: intent, set: {max_num_seqs: 192}}
          - {policy: kv-thrash, kind: proposed, set: {max_num_seqs: SEQS}}
      - at: 3m
        decisions:
          - {policy: kv-thrash, kind: applied, set: {max_num_seqs: 192}}
    final:
      knobs: {main: {max_num_seqs: 192}}
      phases: {kv-thrash: {main: firing}}
"""


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    (tmp_path / "kv-thrash.yaml").write_text(POLICY)
    (tmp_path / "tests").mkdir()
    return tmp_path / "tests"


def test_passing_tests_exit_zero(pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pack / "kv.test.yaml").write_text(TEST.replace("SEQS", "192"))
    assert main(["test", str(pack)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ok   {pack / 'kv.test.yaml'}: thrashing for two minutes proposes fewer sequences",
        "1 passed, 0 failed",
    ]


def test_a_failing_test_exits_one_with_a_diff(
    pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = pack / "kv.test.yaml"
    path.write_text(TEST.replace("SEQS", "128"))
    assert main(["test", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"FAIL {path}: thrashing for two minutes proposes fewer sequences",
        f"{path}:16:9: tests.0.expect.0: at 2m: the decisions differ "
        "(- expected but not made, + made but not expected)",
        "      {policy: kv-thrash, target: main, kind: fired}",
        "      {policy: kv-thrash, target: main, kind: intent, set: {max_num_seqs: 192}}",
        "    - {policy: kv-thrash, kind: proposed, set: {max_num_seqs: 128}}   # never made",
        "    + {policy: kv-thrash, target: main, kind: proposed, set: {max_num_seqs: 192}}",
        "          evidence: preemptions_per_s=2, ttft_p95_s=5 "
        "(condition: preemptions_per_s > 0.5 && ttft_p95_s > 2.0; held 2m)",
        "0 passed, 1 failed",
    ]


def test_file_problems_are_located_and_exit_one(
    pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = pack / "kv.test.yaml"
    path.write_text(TEST.replace("SEQS", "192").replace("approvals:", "aprovals:"))
    assert main(["test", str(path), str(pack / "missing.test.yaml")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{pack / 'missing.test.yaml'}:0:0: no such file or directory",
        f"{path}:13:5: tests.0.aprovals: unknown key (did you mean 'approvals'? allowed here: "
        "approvals, duration, expect, final, name, series)",
        "0 passed, 0 failed, 2 file(s) with problems",
    ]


def test_timeline_shows_every_decision(pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pack / "kv.test.yaml").write_text(TEST.replace("SEQS", "192"))
    assert main(["test", "--timeline", str(pack)]) == 0
    out = capsys.readouterr().out
    assert "      2m  {policy: kv-thrash, target: main, kind: fired}\n" in out
    assert (
        "      3m  {policy: kv-thrash, target: main, kind: applied, set: {max_num_seqs: 192}}\n"
        in out
    )


RESOLVING = """\
policies: [../kv-thrash.yaml]
interval: 1m
targets:
  main:
    knobs: {max_num_seqs: 256}
    envelopes:
      max_num_seqs: {min: 32, max: 1024, max_step: 256}
tests:
  - name: fires at 2m, clear from 5m, resolved at 10m
    series:
      main:
        preemptions_per_s: "2x4 0x6"
        ttft_p95_s: "5x10"
    expect: []
"""


def test_timeline_of_a_resolve_says_how_long_the_clear_condition_held(
    pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clear = "for: 2m\nclear: preemptions_per_s < 0.05\nkeep_firing_for: 5m\n"
    (pack.parent / "kv-thrash.yaml").write_text(POLICY.replace("for: 2m\n", clear))
    (pack / "kv.test.yaml").write_text(RESOLVING)
    assert main(["test", "--timeline", str(pack)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("     10m  {policy: kv-thrash, target: main, kind: resolved}")
    assert lines[at + 1 : at + 3] == [
        "          evidence: preemptions_per_s=0 (condition: preemptions_per_s < 0.05; held 5m)",
        "          fired for 8m",
    ]


def test_an_empty_directory_is_not_a_pass(pack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(pack)]) == 1
    assert "no test files found" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "schema"),
    [(["schema"], policy_schema()), (["schema", "--tests"], policy_test_schema())],
)
def test_schema_prints_the_json_schema(
    argv: list[str], schema: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == schema
