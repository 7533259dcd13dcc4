"""``vllm-governor backtest`` options: what makes a backtest, and what is said otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.app.cli import main
from tests.unit.backtest.worlds import busy, series, write_policy, write_recording


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--policies", "p"], "give either --recording FILE or --prometheus URL"),
        (["--recording", "r", "--prometheus", "http://x"], "give either --recording"),
        (["--recording", "r"], "give --policies DIR (or, to only import, --save FILE)"),
        (["--recording", "r", "--against", "b", "--save", "s"], "--against needs --policies"),
        (["--prometheus", "http://x", "--policies", "p"], "--prometheus needs --start"),
        (["--prometheus", "http://x", "--start", "soon", "--policies", "p"], "--start 'soon'"),
        (
            ["--prometheus", "http://x", "--start", "now-1h", "--step", "fast", "--policies", "p"],
            "--step: 'fast' is not a duration",
        ),
        (
            ["--prometheus", "http://x", "--start", "now", "--knob", "main=3", "--policies", "p"],
            "--knob 'main=3': write TARGET.KNOB=NUMBER",
        ),
        (["--recording", "r", "--policies", "p", "--flap-fires", "0"], "--flap-fires must be"),
    ],
)
def test_options_that_make_no_backtest_are_refused(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["backtest", *argv]) == 2
    assert expected in capsys.readouterr().err


def test_a_recording_replays_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = write_recording(
        tmp_path / "rec.jsonl", series((10, {"running": 12.0})), {"max_num_seqs": 256.0}
    )
    policies = write_policy(tmp_path / "a", "busy", busy())
    config = tmp_path / "config.toml"
    config.write_text('[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:8000"\n')
    report = tmp_path / "out.json"
    argv = ["--recording", str(recording), "--policies", str(policies), "--config", str(config)]
    assert main(["backtest", *argv, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "10 tick(s) from 2026-11-29 10:00:00 to 2026-11-29 10:00:45 UTC; targets: main" in out
    assert "main  busy  fired  running=12" in out
    body = json.loads(report.read_text())
    # No envelope in that config: the planner blocks the change, as the daemon would.
    assert [(e["kind"], e["guard"]) for e in body["a"]["timeline"]] == [
        ("fired", None),
        ("blocked", "no_envelope"),
    ]


def test_a_broken_config_is_reported_where_it_is_broken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[recording]\nmax_bytes = 10\n")
    argv = ["backtest", "--recording", "r", "--policies", "p", "--config", str(config)]
    assert main(argv) == 78  # EX_CONFIG, as every command says a broken configuration
    assert f"{config}:2:1: recording.max_bytes: " in capsys.readouterr().err
