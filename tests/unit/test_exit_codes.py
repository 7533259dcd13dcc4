"""One exit-status convention for every command (issue 15, finding 11; README "Exit statuses").

Every command that reads a configuration is run, in process, on a broken one: each must exit
78 (EX_CONFIG) and say where the file is broken. The commands are found by walking the real
parser, so a command added later without an entry in :data:`ARGUMENTS` fails here until it is
given one (or a reason in :data:`NOT_RUN`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.app.cli import build_parser, main
from daemon.app.defaults import EXIT_CONFIG

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "simulator" / "workloads" / "proof-four-phases.yaml"
PROFILE = "llama-3.1-8b-h100-tp1"

# What each command needs besides --config to get as far as reading it.
ARGUMENTS: dict[tuple[str, ...], list[str]] = {
    ("run",): [],
    ("check",): [],
    ("schema",): ["--signals"],
    ("status",): [],
    ("signals",): ["--window", "0.1"],
    ("explain",): ["busy", "--window", "0.1"],
    ("apply",): ["--dry-run", "--instance", "main", "--set", "max_num_seqs=8"],
    ("proposals",): [],
    ("approve",): ["1"],
    ("reject",): ["1"],
    ("freeze",): ["main", "--for", "1m", "--reason", "load test"],
    ("unfreeze",): ["main"],
    ("freezes",): [],
    ("fleet", "status"): [],
    ("fleet", "freeze"): ["--for", "1m", "--reason", "load test"],
    ("fleet", "unfreeze"): [],
    ("quarantine",): [],
    ("unquarantine",): ["busy", "main", "--reason", "fixed"],
    ("backtest",): ["--recording", "r.jsonl", "--policies", "policies"],
    ("whatif",): ["main"],
    ("batch", "submit"): ["jobs.jsonl", "--target", "main"],
    ("batch", "status"): ["1"],
    ("batch", "pause"): ["1"],
    ("batch", "resume"): ["1"],
    ("batch", "cancel"): ["1"],
    # sim's --config is a vLLM config (YAML): a broken one is a broken configuration too.
    ("sim", "run"): ["--profile", PROFILE, "--workload", str(WORKLOAD), "--json", "out.json"],
    ("sim", "serve"): ["--profile", PROFILE],
    # Checked before any run: a broken config fails at once, not after the baselines.
    ("simulate",): ["--workload", str(WORKLOAD)],
}
# Commands with --config that this test does not run, and why.
NOT_RUN: dict[tuple[str, ...], str] = {}


def commands_with_config(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every command (subcommands included) that takes --config."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        if any("--config" in action.option_strings for action in parser._actions):
            yield path
        return
    for name, subparser in nested[0].choices.items():
        yield from commands_with_config(subparser, (*path, name))


def test_every_command_with_a_config_is_covered() -> None:
    found = set(commands_with_config(build_parser()))
    missing = found - set(ARGUMENTS) - set(NOT_RUN)
    assert not missing, f"give these commands their arguments in ARGUMENTS: {sorted(missing)}"


@pytest.fixture
def broken(tmp_path: Path) -> dict[str, Path]:
    """A governor config with an unknown key on line 3, and a vLLM config cut short."""
    governor = tmp_path / "config.toml"
    governor.write_text(
        f'[governor]\nstate_dir = "{tmp_path / "state"}"\nno_such_key = 1\n'
        f'[control]\nsocket_path = "{tmp_path / "control.sock"}"\n'
    )
    vllm = tmp_path / "vllm.yaml"
    vllm.write_text("max-num-seqs: [8\n")
    return {"governor": governor, "vllm": vllm}


@pytest.mark.parametrize(
    "command", sorted(set(commands_with_config(build_parser())) & set(ARGUMENTS)), ids=" ".join
)
def test_a_broken_config_exits_78_whatever_the_command(
    command: tuple[str, ...],
    broken: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # where relative outputs (out.json) would go
    config = broken["vllm" if command[0] == "sim" else "governor"]
    code = main([*command, *ARGUMENTS[command], "--config", str(config)])
    said = capsys.readouterr()
    where = f"{config}:2:1: " if command[0] == "sim" else f"{config}:3:1: governor.no_such_key: "
    assert code == EXIT_CONFIG, said.out + said.err
    assert where in said.out + said.err


def test_apply_for_a_policy_reads_the_config_too(
    broken: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # The path that asks the daemon for the plan: it said "cannot find the control socket", 1.
    code = main(["apply", "--dry-run", "--policy", "busy", "--config", str(broken["governor"])])
    assert code == EXIT_CONFIG
    assert f"{broken['governor']}:3:1: governor.no_such_key: " in capsys.readouterr().err
