from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_valid_config_and_policy_exit_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("name: kv-thrash\nwhen: kv_usage > 0.9\ntargets: [main]\n")
    assert main(["check", "--config", str(ROOT / "config.example.toml"), str(policy)]) == 0
    assert capsys.readouterr().out.strip() == "ok: 2 file(s) valid"


@pytest.mark.parametrize(
    ("config_text", "expected"),
    [
        ("[governor\n", ":1:10: TOML syntax error"),
        ("[metrics]\n\nportt = 1\n", ":3:1: metrics.portt: unknown key"),
        ("[metrics]\nenabled = 1\n", ":2:1: metrics.enabled: expected true or false"),
    ],
)
def test_broken_config_exits_78_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_text: str, expected: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text)
    assert main(["check", "--config", str(config)]) == 78
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"{config}{expected}")


def test_policy_problems_are_listed_one_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\n  when: [unclosed\n")
    (tmp_path / "list.yml").write_text("- a\n")
    (tmp_path / "notes.txt").write_text("not a policy")
    code = main(
        ["check", "--config", str(ROOT / "config.example.toml"), str(tmp_path), "/nope.yaml"]
    )
    assert code == 78
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "/nope.yaml:0:0: no such file or directory"
    # The wording is the YAML parser's (libyaml's when PyYAML has it); the place is ours.
    assert out[1].startswith(f"{tmp_path / 'bad.yaml'}:2:7: YAML syntax error: mapping values")
    assert out[2] == f"{tmp_path / 'list.yml'}:1:1: the top level must be a mapping, not seq"
    assert len(out) == 3


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("vllm-governor 0.1.0")


def test_no_command_prints_help_and_exits_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "run" in capsys.readouterr().err


KNOWN_KNOBS = (
    "enable_log_requests, log_level, long_prefill_token_threshold, max_num_active_seqs, "
    "max_num_batched_tokens, max_num_seqs, prefill_schedule_interval, uvicorn_log_level, "
    "watermark"
)
POLICY_KEYS = (
    "action, budget_per_hour, canary, clear, cooldown, description, for, keep_firing_for, mode, "
    "name, on_no_data, schedule, scope, targets, when"
)


def test_policy_semantics_are_checked_with_lines_and_key_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\n"
        "targets: [main, nope]\n"
        "when: running > 100.0\n"
        "action:\n"
        "  set: {max_num_seqs: current * 2.0, bogus_knob: 1}\n"
        "cooldwn: 5m\n"
    )
    code = main(["check", "--config", str(ROOT / "config.example.toml"), str(tmp_path)])
    assert code == 78
    out = capsys.readouterr().out.splitlines()
    where = tmp_path / "p.yaml"
    assert out == [
        f"{where}:2:17: targets.1: unknown target 'nope' (targets: envoy, main)",
        f"{where}:5:38: action.set.bogus_knob: unknown knob 'bogus_knob' (known: {KNOWN_KNOBS})",
        f"{where}:6:1: cooldwn: unknown key (did you mean 'cooldown'? allowed here: {POLICY_KEYS})",
    ]


def test_every_problem_of_a_policy_is_reported_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Schema problems (for, budget_per_hour, cooldwn, risk) used to hide the expressions',
    # the targets' and the knobs' until they were fixed; and pydantic's words leaked.
    (tmp_path / "p.yaml").write_text(
        "name: p\n"
        "targets: [main, mian]\n"
        "when: running > 100 && kv_usag > 0.5\n"
        "for: 2 minutes\n"
        "cooldwn: 30m\n"
        "budget_per_hour: many\n"
        "action:\n"
        "  set: {max_num_seqs: \"'lots'\", max_num_seq: current}\n"
        "  risk: later\n"
    )
    assert main(["check", "--config", str(ROOT / "config.example.toml"), str(tmp_path)]) == 78
    where = tmp_path / "p.yaml"
    assert capsys.readouterr().out.splitlines() == [
        f"{where}:2:17: targets.1: unknown target 'mian' (did you mean 'main'? targets: envoy, "
        "main)",
        f"{where}:3:1: when: found no matching overload for '_>_' applied to '(double, int)'; "
        "signals are doubles: write thresholds with a decimal point (100.0, not 100) "
        "(expression column 9)",
        f"{where}:4:1: for: '2 minutes' is not a duration: write e.g. 30s, 2m, 1h30m or 1d",
        f"{where}:5:1: cooldwn: unknown key (did you mean 'cooldown'? allowed here: {POLICY_KEYS})",
        f"{where}:6:1: budget_per_hour: expected a whole number (got 'many')",
        f"{where}:8:9: action.set.max_num_seqs: a knob's new value must be a number or a "
        "boolean, not a string (expression column 1)",
        f"{where}:8:33: action.set.max_num_seq: unknown knob 'max_num_seq' (did you mean "
        f"'max_num_seqs'? known: {KNOWN_KNOBS})",
        f"{where}:9:3: action.risk: expected 'auto' or 'approval' (got 'later')",
    ]


def test_every_policy_file_is_checked_in_the_same_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text("name: a\nwhen: kv_usage > 0.9\nmode: loud\n")
    (tmp_path / "b.yaml").write_text("name: b\nwhen: kv_usag > 0.9\n")
    assert main(["check", "--config", str(ROOT / "config.example.toml"), str(tmp_path)]) == 78
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'a.yaml'}:3:1: mode: expected 'active' or 'shadow' (got 'loud')",
        f"{tmp_path / 'b.yaml'}:2:1: when: unknown signal or function 'kv_usag' (`vllm-governor "
        "schema --signals --config config.toml` lists the names, configured Prometheus and MQTT "
        "signals included) (expression column 1)",
    ]


def test_a_constant_outside_the_envelope_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\nwhen: kv_usage > 0.9\naction:\n  set: {max_num_seqs: 4096}\n"
    )
    assert main(["check", "--config", str(ROOT / "config.example.toml"), str(tmp_path)]) == 78
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'p.yaml'}:4:9: action.set.max_num_seqs: 4096 is outside main's envelope "
        "for max_num_seqs [32, 1024] in config.toml"
    ]
