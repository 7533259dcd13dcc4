"""A test file with a problem runs nothing and says where the problem is."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.policy.testing.suites import load_suite

POLICY = "name: down\nwhen: kv_usage > 0.9\naction: {set: {max_num_seqs: 'current * 0.5'}}\n"
GOOD = """\
policies: [down.yaml]
targets:
  main:
    knobs: {max_num_seqs: 256}
tests:
  - name: t
    series:
      main:
        kv_usage: "0.95x6"
    expect:
      - at: 30s
        decisions: []
"""


def problems(tmp_path: Path, text: str, policy: str = POLICY) -> list[str]:
    (tmp_path / "down.yaml").write_text(policy)
    path = tmp_path / "t.test.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as caught:
        load_suite(path)
    return [issue.render().replace(f"{tmp_path}/", "") for issue in caught.value.issues]


def test_a_good_file_loads(tmp_path: Path) -> None:
    (tmp_path / "down.yaml").write_text(POLICY)
    (tmp_path / "t.test.yaml").write_text(GOOD)
    suite = load_suite(tmp_path / "t.test.yaml")
    assert [spec.name for spec in suite.specs] == ["down"]
    assert suite.interval_s == 10.0
    assert suite.start.isoformat() == "2026-01-05T12:00:00+00:00"
    (case,) = suite.cases
    assert case.last_tick == 6  # 0.95x6 is seven values
    assert case.series["main"]["kv_usage"] == [0.95] * 7
    assert [e.tick for e in case.expectations] == [3]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("expect:", "expct:"), ["t.test.yaml:10:5: tests.0.expct: unknown key"]),
        (
            ('"0.95x6"', "0x10"),  # YAML reads an unquoted 0x10 as the hexadecimal 16
            [
                "t.test.yaml:9:9: tests.0.series.main.kv_usage: a series is a quoted string such "
                'as "0.5x30" (unquoted, YAML reads 0x10 as the number 16)'
            ],
        ),
        (
            ('"0.95x6"', '"0.95x6 oops"'),
            ["t.test.yaml:9:9: tests.0.series.main.kv_usage: 'oops' (column 8) is not a value"],
        ),
        (
            ("kv_usage:", "kv_usag:"),
            [
                "t.test.yaml:9:9: tests.0.series.main.kv_usag: unknown signal 'kv_usag' (did you "
                "mean 'kv_usage'?)"
            ],
        ),
        (
            ("kv_usage:", "host_disk_usage_ratio:"),
            [
                "t.test.yaml:9:9: tests.0.series.main.host_disk_usage_ratio: host_disk_usage_ratio "
                'is keyed by path: give a series per path, e.g. {"/var/log": "0.9x30"}'
            ],
        ),
        (
            ('kv_usage: "0.95x6"', 'kv_usage: {"0": "1x3"}'),
            [
                "t.test.yaml:9:9: tests.0.series.main.kv_usage: kv_usage is one value per tick: "
                "give one series string"
            ],
        ),
        (
            ("      main:\n        kv", "      backup:\n        kv"),
            [
                "t.test.yaml:8:7: tests.0.series.backup: unknown target 'backup' (targets of this "
                "file: main)"
            ],
        ),
        (
            ("at: 30s", "at: 35s"),
            [
                "t.test.yaml:11:9: tests.0.expect.0.at: 35s falls between ticks: they come every "
                "10s from 0s"
            ],
        ),
        (
            ("    series:", "    duration: 20s\n    series:"),
            ["t.test.yaml:12:9: tests.0.expect.0.at: 30s is after the test's last tick (20s)"],
        ),
        (
            ("decisions: []", "decisions: [{policy: up, set: {max_num_sqs: 1}}]"),
            [
                "t.test.yaml:12:22: tests.0.expect.0.decisions.0.policy: unknown policy 'up' "
                "(policies loaded: down)",
                "t.test.yaml:12:40: tests.0.expect.0.decisions.0.set.max_num_sqs: unknown knob "
                "'max_num_sqs' (did you mean 'max_num_seqs'?)",
            ],
        ),
        (
            ("decisions: []", "decisions: [{kind: approved}]"),
            [
                "t.test.yaml:12:22: tests.0.expect.0.decisions.0.kind: expected 'fired', "
                "'resolved', 'intent', 'blocked', 'shadow', 'alert', 'notify', 'tune', 'realised', "
                "'error', 'applied' or 'proposed'"
            ],
        ),
        (
            ("        decisions: []\n", ""),
            ["t.test.yaml:11:9: tests.0.expect.0.decisions: required key is missing"],
        ),
        (
            ("knobs: {max_num_seqs: 256}", "knobs: {max_num_seq: 256}"),
            [
                "t.test.yaml:4:13: targets.main.knobs.max_num_seq: unknown knob 'max_num_seq' (did "
                "you mean 'max_num_seqs'?)"
            ],
        ),
        (
            ("[down.yaml]", "[down.yaml, ../nope.yaml]"),
            ["t.test.yaml:1:23: policies.1: no such file or directory: "],
        ),
        (
            ("tests:", "start: 2026-11-30 12:00:00\ntests:"),
            ["t.test.yaml:5:1: start: expected a time zone (2026-11-30T12:00:00Z, or +01:00)"],
        ),
        (
            ("tests:", "interval: soon\ntests:"),
            ["t.test.yaml:5:1: interval: 'soon' is not a duration"],
        ),
        (
            ("tests:", "interval: 0s\ntests:"),
            ["t.test.yaml:5:1: interval: the interval must be positive"],
        ),
        (
            ("    expect:", "    duration: 30d\n    expect:"),
            ["t.test.yaml:10:5: tests.0.duration: the test runs 259200 ticks; at most 100000"],
        ),
        (
            ("    expect:", "    approvals: [{at: 1m, policy: down, answer: maybe}]\n    expect:"),
            ["t.test.yaml:10:40: tests.0.approvals.0.answer: expected 'approve' or 'reject'"],
        ),
    ],
)
def test_problems_are_located(tmp_path: Path, change: tuple[str, str], expected: list[str]) -> None:
    assert change[0] in GOOD
    found = problems(tmp_path, GOOD.replace(*change, 1))
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want), got


def test_duplicate_test_names(tmp_path: Path) -> None:
    text = GOOD + "  - name: t\n"
    assert problems(tmp_path, text) == ["t.test.yaml:13:5: tests.1.name: another test is named 't'"]


def test_a_broken_policy_is_reported_in_its_own_file(tmp_path: Path) -> None:
    found = problems(tmp_path, GOOD, policy="name: down\nwhen: kv_usage > 1\n")
    assert len(found) == 1
    assert found[0].startswith("down.yaml:2:1: when: found no matching overload")


def test_bad_yaml_is_located(tmp_path: Path) -> None:
    # The wording is the YAML parser's (libyaml's when PyYAML has it); the place is ours.
    (found,) = problems(tmp_path, "policies: [\n")
    assert found.startswith("t.test.yaml:2:1: YAML syntax error: ")
