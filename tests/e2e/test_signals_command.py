"""``vllm-governor signals --json``: the contract other tools and acceptance checks read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.sim_serve import sim_serve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
REQUIRED = {"running", "waiting", "kv_usage", "preemptions_per_s", "ttft_p95_s", "tpot_p95_s",
            "gen_tokens_per_s", "healthy"}  # fmt: skip


def _signals(config: Path, *extra: str) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.app.cli",
            "signals",
            "--config",
            str(config),
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def _check_contract(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    for row in answer["signals"]:
        assert set(row) == {
            "name",
            "target",
            "labels",
            "value",
            "source",
            "age_s",
            "state",
            "reason",
        }
        assert row["state"] in ("ok", "stale", "no_data", "implausible")
        assert bool(row["reason"]) == (row["state"] == "implausible")
        if row["state"] != "ok":
            assert row["value"] is None
    main = {
        row["name"]: row
        for row in answer["signals"]
        if row["target"] == "main" and "engine" not in row["labels"]
    }
    assert set(main) >= REQUIRED
    return main


def _config(directory: Path, exporter: FixtureExporter) -> Path:
    vllm = f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
    return write_config(directory, extra=vllm)


def test_one_off_collection_without_a_daemon(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        main = _check_contract(_signals(_config(short_tmp, exporter), "--window", "1.5"))
    assert main["running"]["state"] == "ok"
    assert main["running"]["source"] == "vllm/main"
    assert main["healthy"]["value"] == 1.0
    assert 0 <= main["kv_usage"]["value"] <= 1
    assert main["preemptions_per_s"]["value"] == 0.0  # a page that never changes: nothing moved
    assert main["ttft_p95_s"]["state"] == "no_data"  # no request finished inside the window


def test_from_the_running_daemon(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        config = _config(short_tmp, exporter)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            main = _check_contract(_signals(config, "--window", "30"))
    assert main["running"]["state"] == "ok"


def test_an_unreachable_vllm_is_no_data_not_zero(short_tmp: Path) -> None:
    exporter = FixtureExporter()  # never started: connection refused
    main = _check_contract(_signals(_config(short_tmp, exporter), "--window", "0.5"))
    assert {row["state"] for row in main.values()} == {"no_data"}


def _table(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "signals", "--config", str(config), *extra],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_the_table_without_a_daemon_says_nothing_stray(short_tmp: Path) -> None:
    """Issue 19, finding 4: a real table, units formatted, and no bare log line on stderr."""
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        extra = '[[vllm]]\nname = "down"\nurl = "http://127.0.0.1:9"\n'
        config = _config(short_tmp, exporter)
        config.write_text(config.read_text() + extra)
        result = _table(config, "--window", "1.5")
    assert result.returncode == 0, result.stderr
    # Before: "source down" here, a log record without its fields (the table has them).
    assert result.stderr == "no daemon running; collecting for 1.5 s\n"
    lines = result.stdout.splitlines()
    assert any(line.startswith("  vllm/down ") and "connection refused" in line for line in lines)
    header = next(line for line in lines if line.startswith("TARGET"))
    assert header.split() == ["TARGET", "SOURCE", "SIGNAL", "LABELS", "VALUE", "AGE", "STATE"]
    body = lines[lines.index(header) + 1 :]
    # Aligned: every row's state starts in the header's STATE column.
    column = header.index("STATE")
    assert all(line[column - 2 : column] == "  " for line in body if line)
    assert body[0].split()[:2] == ["main", "vllm/main"]  # a group's first row names it
    kv = next(line for line in body if " kv_usage " in line)
    assert "81.25 %" in kv
    # One engine: its series are the server's, shown once, not again under engine=0.
    assert not any("engine=" in line for line in body)
    # Grouped: main's rows, then down's, then the shared host signals.
    firsts = [line.split()[0] for line in body if line and not line.startswith(" ")]
    assert firsts[0] == "main"
    assert firsts.index("down") < firsts.index("-")
    disk = next(line for line in body if "host_disk_total_bytes" in line)
    assert "GiB" in disk or "TiB" in disk or "MiB" in disk
    assert "e+" not in result.stdout


def test_the_table_from_the_running_daemon(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        config = _config(short_tmp, exporter)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            result = _table(config)
    assert (result.returncode, result.stderr) == (0, "")
    assert "TARGET  SOURCE     SIGNAL" in result.stdout
    assert any(" kv_usage " in line and "81.25 %" in line for line in result.stdout.splitlines())


# Short requests at a steady rate: each scrape finds tokens generated and first tokens timed.
STEADY_LOAD = """\
name: steady
duration_s: 600
seed: 5
arrivals: {rate_rps: 8}
prompt_tokens: {median: 100, p90: 200, max: 400}
output_tokens: {median: 20, p90: 40, max: 80}
"""


def test_without_a_daemon_rates_and_quantiles_cover_what_was_collected(short_tmp: Path) -> None:
    """Issue 15, finding 11: the defaults (5 s of scrapes every 2 s) against a 60 s window.

    Before, every rate and quantile was no_data: they were computed over the collection's
    length from its end, which leaves out its first scrape (the window is open on the left).
    """
    with sim_serve(short_tmp, "max-num-seqs: 8\n", load=STEADY_LOAD) as sim:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:{sim.port}"\n'
            "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n"
        )
        config = write_config(short_tmp, extra=extra)
        answer = _signals(config)
        table = _table(config)
    main = _check_contract(answer)
    assert main["gen_tokens_per_s"]["state"] == "ok"
    assert main["gen_tokens_per_s"]["value"] > 0
    assert main["ttft_p95_s"]["state"] == "ok"
    assert answer["window_s"] >= 5.0  # the span collected, said in the answer
    assert table.returncode == 0, table.stderr
    [note] = [line for line in table.stdout.splitlines() if "rates and quantiles" in line]
    assert "s collected here, not signals.window_s (60 s)" in note
