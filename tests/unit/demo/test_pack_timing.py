"""The demo's copy of the pack: the story's policy on the demo's clock, the rest as shipped."""

from __future__ import annotations

from pathlib import Path

import yaml

from daemon.app.demo.pack_timing import DEMO_MIN_CAP, write_demo_pack, write_demo_profile
from daemon.app.demo.scenario import DEFAULT_PACK, PROFILE
from daemon.policy.loading import load_policies
from simulator.profiles import load_profile

STORY = """\
name: ttft-queue
targets: ["*"]
when: ttft_p95_s > 2.0
for: 3m
action:
  tune: {knobs: [max_num_batched_tokens], window: 10m, min_gain: 10%}
cooldown: 30m
"""
OTHER = """\
name: other
targets: ["*"]
when: ttft_p95_s > 9.0
for: 3m
action:
  set: {max_num_seqs: "current * 2.0"}
"""


def test_the_story_policy_is_retimed_and_the_others_copied_as_they_are(tmp_path: Path) -> None:
    source, into = tmp_path / "pack", tmp_path / "demo"
    (source / "tests").mkdir(parents=True)
    (source / "ttft-queue.yaml").write_text(STORY)
    (source / "other.yaml").write_text(OTHER)
    (source / "tests" / "ttft-queue.test.yaml").write_text("not a policy")
    profile = tmp_path / "profile.yaml"
    write_demo_profile(PROFILE, profile, restart_s=13.0)
    [retimed] = write_demo_pack(source, into, profile)
    assert (retimed.for_s, retimed.window_s) == (180.0, 600.0)
    assert "waits 15 s instead of 180 s and looks back 35 s instead of 600 s" in retimed.line()
    assert sorted(p.name for p in into.iterdir()) == ["other.yaml", "ttft-queue.yaml"]
    assert (into / "other.yaml").read_text() == OTHER
    loaded = load_policies([into])
    assert loaded.issues == ()
    specs = {spec.name: spec for spec in loaded.specs}
    story = specs["ttft-queue"]
    assert story.for_s == 15.0
    assert story.action is not None
    assert story.action.tune is not None
    assert story.action.tune.window_s == 35.0
    assert story.action.tune.profile == str(profile)
    assert story.action.tune.min_gain == 0.10  # the pack's, untouched
    assert story.cooldown_s == 1800.0
    assert specs["other"].for_s == 180.0


def test_a_pack_without_the_story_policy_runs_as_it_is(tmp_path: Path) -> None:
    source = tmp_path / "pack"
    source.mkdir()
    (source / "other.yaml").write_text(OTHER)
    assert write_demo_pack(source, tmp_path / "demo", tmp_path / "profile.yaml") == []
    assert (tmp_path / "demo" / "other.yaml").read_text() == OTHER


def test_the_demo_profile_restarts_as_the_demo_server_does(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    write_demo_profile(PROFILE, path, restart_s=13.0)
    demo, shipped = load_profile(path), load_profile(PROFILE)
    assert demo.restart_downtime_s(64, 512) == 13.0
    assert shipped.restart_downtime_s(64, 512) > 40.0
    assert yaml.safe_load(path.read_text())["kv_blocks"] == shipped.kv_blocks


def test_log_disk_reads_the_demo_log_directory_on_the_demo_clock(tmp_path: Path) -> None:
    into, log_dir, profile = tmp_path / "demo", tmp_path / "logs", tmp_path / "profile.yaml"
    write_demo_profile(PROFILE, profile, restart_s=13.0)
    retimed = write_demo_pack(DEFAULT_PACK, into, profile, log_dir)
    assert [r.policy for r in retimed] == ["ttft-queue", "admission-cap", "log-disk"]
    line = retimed[2].line()
    assert "log-disk waits 10 s instead of 300 s" in line
    assert "reads the demo's log directory instead of /var/log" in line
    loaded = load_policies([into])
    assert loaded.issues == ()
    specs = {spec.name: spec for spec in loaded.specs}
    shipped = {spec.name: spec for spec in load_policies([DEFAULT_PACK]).specs}
    logs, pack = specs["log-disk"], shipped["log-disk"]
    assert logs.for_s == 10.0
    key = f'host_disk_usage_ratio["{log_dir}"]'
    assert yaml.safe_load((into / "log-disk.yaml").read_text())["when"] == f"{key} > 0.85"
    assert "/var/log" not in (into / "log-disk.yaml").read_text()
    # Everything else is the pack's: hysteresis, action, risk, cooldown, budget.
    assert logs.clear is not None
    assert logs.clear.source == f"{key} < 0.80"
    assert (logs.keep_firing_for_s, logs.cooldown_s) == (pack.keep_firing_for_s, pack.cooldown_s)
    assert logs.budget_per_hour == pack.budget_per_hour
    assert logs.action is not None
    assert pack.action is not None
    assert logs.action.risk == pack.action.risk == "approval"
    assert [(c.knob, c.value.source) for c in logs.action.changes] == [
        (c.knob, c.value.source) for c in pack.action.changes
    ]


def test_the_gate_s_floor_is_raised_and_the_rest_of_admission_cap_is_the_pack_s(
    tmp_path: Path,
) -> None:
    into, profile = tmp_path / "demo", tmp_path / "profile.yaml"
    write_demo_profile(PROFILE, profile, restart_s=13.0)
    retimed = {r.policy: r for r in write_demo_pack(DEFAULT_PACK, into, profile, tmp_path)}
    gate = retimed["admission-cap"]
    assert gate.prefix == "in the demo"
    assert "cuts the gate's cap to 48 at the lowest instead of 4" in gate.line()
    assert retimed["ttft-queue"].prefix == "on the demo's clock"
    demo = {spec.name: spec for spec in load_policies([into]).specs}["admission-cap"]
    pack = {spec.name: spec for spec in load_policies([DEFAULT_PACK]).specs}["admission-cap"]
    assert demo.action is not None
    assert pack.action is not None
    assert demo.action.admission is not None
    assert pack.action.admission is not None
    assert (pack.action.admission.min_cap, demo.action.admission.min_cap) == (4, DEMO_MIN_CAP)
    assert demo.action.admission.params == pack.action.admission.params
    assert (demo.when.source, demo.for_s) == (pack.when.source, pack.for_s)
