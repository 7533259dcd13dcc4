"""The runner, table-driven: for each feature a test that passes and one that fails, with its diff."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from daemon.policy.testing.runner import FileResult, render_failure, run_file

POLICIES = {
    # Halves max_num_seqs (the envelope allows 64 per step) when the KV cache is full.
    "down.yaml": """
        name: down
        when: kv_usage > 0.9
        for: 30s
        cooldown: 1m
        action: {set: {max_num_seqs: "current * 0.5"}, risk: auto}
    """,
    # Asks a person before it takes 32 sequences off.
    "cut.yaml": """
        name: cut
        when: preemptions_per_s > 0.5
        action: {set: {max_num_seqs: "current - 32.0"}, risk: approval}
    """,
    # A map signal: the disk of the log volume.
    "disk.yaml": """
        name: disk
        when: host_disk_usage_ratio["/var/log"] > 0.85
        action: {set: {log_level: "40.0"}, risk: auto}
    """,
    "quiet.yaml": """
        name: quiet
        when: waiting > 100.0
        mode: shadow
        action: {set: {max_num_seqs: "current - 64.0"}}
    """,
    # Acts only in a nightly window.
    "nightly.yaml": """
        name: nightly
        when: running > 1000.0
        schedule: {windows: [{cron: "0 2 * * *", duration: 1h}]}
        action: {set: {max_num_seqs: "current - 64.0"}, risk: auto}
    """,
}
HEADER = """
policies: [down.yaml, cut.yaml, disk.yaml, quiet.yaml, nightly.yaml]
{start}
targets:
  main:
    knobs: {{max_num_seqs: 256, log_level: 20}}
    envelopes:
      max_num_seqs: {{min: 32, max: 512, max_step: 64, min_dwell_s: 120, hourly_budget: 4}}
      log_level: {{min: 10, max: 40, max_step: 30}}
tests:
"""


def run(tmp_path: Path, case: str, start: str = "") -> FileResult:
    for name, text in POLICIES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / "p.test.yaml"
    path.write_text(HEADER.format(start=start) + textwrap.dedent(case))
    return run_file(path)


def failures(result: FileResult) -> str:
    assert [issue.render() for issue in result.issues] == []
    return "\n".join(
        line for case in result.cases for f in case.failures for line in render_failure(f)
    )


INTENT = """
- name: a full KV cache halves max_num_seqs, one envelope step at a time
  series: {main: {kv_usage: "0.95x6"}}
  expect:
    - at: 30s
      decisions:
        - {policy: down, kind: fired}
        - {policy: down, kind: intent, set: {max_num_seqs: %s}}
        - {policy: down, target: main, kind: applied, set: {max_num_seqs: 192}}
    - at: 40s
      decisions: []
"""
FINAL = """
- name: final state
  series: {main: {kv_usage: "0.95x6"}}
  final:
    knobs: {main: {max_num_seqs: %s}}
    phases: {down: {main: %s}, cut: {main: inactive}}
"""
APPROVED = """
- name: an approved proposal is applied at the approval
  series: {main: {preemptions_per_s: "1x6"}}
  approvals: [{at: 1m, policy: %s, answer: approve}]
  expect:
    - at: 0s
      decisions:
        - {policy: cut, kind: fired}
        - {policy: cut, kind: intent, set: {max_num_seqs: 224}}
        - {policy: cut, kind: proposed, set: {max_num_seqs: 224}}
    - at: 1m
      decisions: [{policy: cut, kind: applied, set: {max_num_seqs: 224}}]
  final: {knobs: {main: {max_num_seqs: 224}}}
"""
REJECTED = """
- name: a rejected proposal is dropped
  series: {main: {preemptions_per_s: "1x6"}}
  approvals: [{at: 1m, policy: cut, target: main, answer: reject}]
  expect:
    - {at: 1m, decisions: []}
  final: {knobs: {main: {max_num_seqs: %s}}}
"""
STALE = """
- name: a proposal whose knob moved meanwhile is not applied
  series: {main: {preemptions_per_s: "1x6", kv_usage: "0.95x6"}}
  approvals: [{at: 1m, policy: cut, answer: approve}]
  expect:
    - at: 1m
      decisions: [{policy: cut, kind: blocked, guard: %s}]
  final: {knobs: {main: {max_num_seqs: 192}}}
"""
DWELL = """
- name: the second change waits for the knob's dwell time
  series: {main: {kv_usage: "0.95x12"}}
  expect:
    - at: 1m30s
      decisions: [{policy: down, kind: blocked, guard: %s}]
"""
NO_DATA = """
- name: no decision on missing data; the policy is pending from the first fresh value
  series: {main: {kv_usage: "_x3 0.95x3"}}
  expect:
    - {at: 0s, decisions: []}
    - at: %s
      decisions:
        - {policy: down, kind: fired}
        - {policy: down, kind: intent}
        - {policy: down, kind: applied}
"""
MAP = """
- name: a full log volume raises the log level
  series: {main: {host_disk_usage_ratio: {"/var/log": "0.9x2", "/": "0.1x2"}}}
  expect:
    - at: 0s
      decisions:
        - {kind: fired}
        - {kind: intent, set: {log_level: 40}}
        - {kind: applied, set: {log_level: %s}}
"""
SHADOW = """
- name: shadow mode records what it would do
  series: {main: {waiting: "500x1"}}
  expect:
    - at: 0s
      decisions: [{policy: quiet, kind: fired}, {policy: quiet, kind: %s, set: {max_num_seqs: 192}}]
  final: {knobs: {main: {max_num_seqs: 256}}}
"""


@pytest.mark.parametrize(
    ("case", "diff"),
    [
        pytest.param(INTENT % 192, [], id="intent-passes"),
        pytest.param(
            INTENT % 128,
            [
                "p.test.yaml:15:7: tests.0.expect.0: at 30s: the decisions differ",
                "      {policy: down, target: main, kind: fired}",
                "    - {policy: down, kind: intent, set: {max_num_seqs: 128}}   # never made",
                "    + {policy: down, target: main, kind: intent, set: {max_num_seqs: 192}}",
                "          evidence: kv_usage=0.95 (condition: kv_usage > 0.9; held 30s)",
            ],
            id="intent-fails",
        ),
        pytest.param(FINAL % (192, "firing"), [], id="final-passes"),
        pytest.param(
            FINAL % (256, "inactive"),
            [
                "p.test.yaml:14:3: tests.0.final: at the end: the state differs",
                "    knobs.main.max_num_seqs: expected 256, got 192",
                "    phases.down.main: expected inactive, got firing",
            ],
            id="final-fails",
        ),
        pytest.param(APPROVED % "cut", [], id="approval-passes"),
        pytest.param(
            APPROVED % "down",
            [
                "p.test.yaml:14:15: tests.0.approvals.0: at 1m: no pending proposal of down to approve",
                "tests.0.expect.1: at 1m: the decisions differ",
                "    - {policy: cut, kind: applied, set: {max_num_seqs: 224}}   # never made",
                "knobs.main.max_num_seqs: expected 224, got 256",
            ],
            id="approval-fails",
        ),
        pytest.param(REJECTED % 256, [], id="reject-passes"),
        pytest.param(REJECTED % 224, ["expected 224, got 256"], id="reject-fails"),
        pytest.param(STALE % "stale_proposal", [], id="stale-proposal-passes"),
        pytest.param(
            STALE % "cooldown",
            [
                "    + {policy: cut, target: main, kind: blocked, set: {max_num_seqs: 224}, "
                "guard: stale_proposal}",
                "          reason: max_num_seqs is 192 now; the proposal assumed 256",
            ],
            id="stale-proposal-fails",
        ),
        pytest.param(DWELL % "dwell", [], id="dwell-passes"),
        pytest.param(
            DWELL % "cooldown",
            [
                "    - {policy: down, kind: blocked, guard: cooldown}   # never made",
                "guard: dwell}",
                "          reason: max_num_seqs changed 60 s ago (dwell 120 s)",
            ],
            id="dwell-fails",
        ),
        pytest.param(NO_DATA % "1m", [], id="no-data-passes"),
        pytest.param(
            NO_DATA % "30s",
            [
                "tests.0.expect.1: at 30s: the decisions differ",
                "    - {policy: down, kind: fired}   # made at 1m",
            ],
            id="no-data-fails",
        ),
        pytest.param(MAP % 40, [], id="map-signal-passes"),
        pytest.param(
            MAP % 30,
            [
                "    - {kind: applied, set: {log_level: 30}}   # never made",
                "    + {policy: disk, target: main, kind: applied, set: {log_level: 40}}",
                "          evidence: host_disk_usage_ratio={'/var/log': 0.9, '/': 0.1} "
                '(condition: host_disk_usage_ratio["/var/log"] > 0.85; held 0s)',
            ],
            id="map-signal-fails",
        ),
        pytest.param(SHADOW % "shadow", [], id="shadow-passes"),
        pytest.param(
            SHADOW % "intent",
            ["    + {policy: quiet, target: main, kind: shadow, set: {max_num_seqs: 192}}"],
            id="shadow-fails",
        ),
    ],
)
def test_expectations(tmp_path: Path, case: str, diff: list[str]) -> None:
    report = failures(run(tmp_path, case))
    if not diff:
        assert report == ""
    for line in diff:
        assert line in report, report


@pytest.mark.parametrize(
    ("start", "kind"),
    [
        ("start: 2026-01-05T02:30:00Z", "applied"),  # inside the nightly window
        ("", "blocked"),  # the default start, Monday noon, is outside it
        ("start: 2026-01-05T04:30:00+02:00", "applied"),  # 02:30 UTC
    ],
)
def test_start_sets_the_wall_clock_that_schedules_read(
    tmp_path: Path, start: str, kind: str
) -> None:
    case = f"""
    - name: nightly
      series: {{main: {{running: "2000x1"}}}}
      expect: [{{at: 0s, decisions: [{{kind: fired}}, {{kind: intent}}, {{kind: {kind}}}]}}]
    """
    if kind == "blocked":
        case = case.replace("{kind: intent}, ", "")
    assert failures(run(tmp_path, case, start)) == ""


def test_unlisted_times_are_unchecked_and_duration_extends_the_run(tmp_path: Path) -> None:
    case = """
    - name: after its end a series has no data, so nothing more happens
      duration: 10m
      series: {main: {kv_usage: "0.95x6"}}
      final: {phases: {down: {main: firing}}}
    """
    result = run(tmp_path, case)
    assert failures(result) == ""
    outcome = result.cases[0].outcome
    assert [(e.tick, e.kind) for e in outcome.events] == [
        (3, "fired"),
        (3, "intent"),
        (3, "applied"),
    ]


def test_a_newer_proposal_supersedes_the_pending_one(tmp_path: Path) -> None:
    case = """
    - name: the second proposal replaces the first; one approval applies the newer
      series: {main: {preemptions_per_s: "1x80"}}
      approvals: [{at: 13m20s, policy: cut, answer: approve}]
      expect:
        - {at: 10m, decisions: [{kind: intent}, {kind: proposed, set: {max_num_seqs: 224}}]}
        - {at: 13m20s, decisions: [{kind: applied, set: {max_num_seqs: 224}}]}
    """
    assert failures(run(tmp_path, case)) == ""


def test_several_tests_run_independently(tmp_path: Path) -> None:
    result = run(tmp_path, INTENT % 192 + FINAL % (256, "firing"))
    assert [case.passed for case in result.cases] == [True, False]
    assert not result.passed
