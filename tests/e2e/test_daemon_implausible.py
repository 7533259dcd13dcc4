"""Implausible values never drive a policy (issue 15, finding 3), seen from outside the daemon.

Before: ``running -3`` and ``kv_usage 7.5`` showed as ``ok``, both policies below fired and
tried to act (blocked only because the current knob was unknown), and a page showing one
series twice was read with the source ``up``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PAGE = (FIXTURES / "v0.33-synthesized.txt").read_text()
RUNNING = 'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0'
KV = 'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.8125'
POLICY = """\
name: {name}
description: Halves max_num_seqs on a condition an implausible value would satisfy.
targets: [main]
when: {when}
for: 0s
action:
  set: {{max_num_seqs: "current * 0.5"}}
"""


def _page(running: str, kv: str) -> bytes:
    text = PAGE.replace(RUNNING, RUNNING.replace("12.0", running))
    return text.replace(KV, KV.replace("0.8125", kv)).encode()


def _eventually(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def _cli(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _rows(socket: Path) -> dict[str, dict[str, Any]]:
    rows = call_daemon(socket, "signals", prefix="")["signals"]
    return {r["name"]: r for r in rows if r["target"] == "main" and "engine" not in r["labels"]}


def _decisions(socket: Path, policy: str) -> list[dict[str, Any]]:
    decisions = call_daemon(socket, "status")["recent_decisions"]
    return [d for d in decisions if d["policy"] == policy]


def _source_down(socket: Path, name: str) -> dict[str, Any] | None:
    sources = call_daemon(socket, "status")["sources"]
    return next((s for s in sources if s["source"] == name and s["state"] == "down"), None)


def test_implausible_values_are_shown_with_the_reason_and_never_acted_on(
    short_tmp: Path,
) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "negative.yaml").write_text(POLICY.format(name="negative", when="running < 0.0"))
    (policies / "full.yaml").write_text(POLICY.format(name="full", when="kv_usage > 0.9"))
    with FixtureExporter(Script(metrics=_page("-3", "7.5"))) as exporter:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
            "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 128\n"
        )
        config = write_config(short_tmp, extra=extra)
        text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
        config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            rows = _eventually(lambda: (r := _rows(socket))["running"]["state"] != "no_data" and r)
            assert rows["running"]["state"] == "implausible"
            assert rows["running"]["value"] is None
            assert rows["running"]["reason"].startswith("-3 is outside its domain: a count")
            assert rows["kv_usage"]["state"] == "implausible"
            assert rows["kv_usage"]["reason"] == "7.5 is outside its domain: a ratio, 0 to 1"
            # Several evaluations on those values: nothing fires, nothing is attempted.
            time.sleep(2.0)
            for name in ("negative", "full"):
                assert _decisions(socket, name) == [], name
                explained = call_daemon(socket, "explain", policy=name)["targets"]["main"]
                assert explained["phase"] == "inactive"
                assert explained["result"] == "implausible"
                assert explained["would"] == []
            explained = call_daemon(socket, "explain", policy="full")["targets"]["main"]
            assert explained["implausible"] == {"kv_usage": rows["kv_usage"]["reason"]}
            text = _cli("explain", "full", "--socket", str(socket))
            assert "now: implausible" in text
            assert f"kv_usage = implausible ({rows['kv_usage']['reason']}): no data" in text

            # The same policy on a plausible full cache fires and tries to act: the test would
            # have seen it above.
            exporter.script.metrics = _page("12.0", "0.95")
            fired = _eventually(lambda: (d := _decisions(socket, "full")) and d)
            assert {d["kind"] for d in fired} >= {"fired"}
            assert _decisions(socket, "negative") == []

            # A page showing one series twice is refused as a whole, and the source says why.
            exporter.script.metrics = _page("12.0", "0.95").replace(
                RUNNING.replace("12.0", "").encode(),
                RUNNING.replace("12.0", "0.0\n").encode() + RUNNING.replace("12.0", "").encode(),
                1,
            )
            source = _eventually(lambda: _source_down(socket, "vllm/main"))
            assert source["detail"] == "duplicate-series"
            assert "duplicate series" in source["last_error"]
            assert "vllm:num_requests_running" in source["last_error"]
