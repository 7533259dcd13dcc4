"""A tune policy in the running daemon: its what-if, its proposal with the prediction, the restart.

Everything is real: ``sim serve`` under supervisord serving code-like traffic in real time (long
prompts, short outputs), the daemon as a subprocess scraping it, a ``tune`` policy asking for
``max_num_batched_tokens`` under a 50 ms TPOT objective. When it fires, the daemon runs the
what-if in its worker process and proposes the pick through the approvals, with the predicted
effect; ``explain`` shows the candidates, ``proposals`` the prediction; an approval restarts
the server on the new value, as any approved change. The policy waits 15 s of traffic before
it first asks (enough finished requests), then a minute between rounds: a newer proposal of
the same change would supersede the one being approved.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.retune import eventually, finished, governor_config, journal, unix_user
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CODE_LIKE = """\
name: code-like
duration_s: 900
seed: 5
arrivals: {rate_rps: 8}
prompt_tokens: {median: 4000, p90: 8800, max: 16000}
output_tokens: {median: 60, p90: 150, max: 1000}
"""
TUNE = """\
name: tpot-tune
targets: [sim]
when: running >= 0.0
for: 15s
cooldown: 1m
action:
  tune: {knobs: [max_num_batched_tokens], tpot_slo: 50ms, window: 1m, min_gain: 10%}
"""
TOKENS_ENVELOPE = """[vllm.knobs.max_num_batched_tokens]
min = 2048
max = 8192
max_step = 8192
min_dwell_s = 0
hourly_budget = 5
"""


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )


def test_a_tune_policy_proposes_its_pick_with_the_prediction_and_an_approval_applies_it(
    short_tmp: Path,
) -> None:
    in_force = "max-num-seqs: 1024\nmax-num-batched-tokens: 8192\n"
    with supervised_sim(short_tmp, in_force, load=CODE_LIKE) as sim:
        config = governor_config(short_tmp, sim, max_ttft_ratio=50.0)
        text = config.read_text().replace(
            "[vllm.knobs.max_num_seqs]", TOKENS_ENVELOPE + "[vllm.knobs.max_num_seqs]"
        )
        users = f'[approvals.restart]\nusers = ["{unix_user()}"]\ntwo_person = false\n'
        config.write_text(text + users)
        (short_tmp / "policies" / "tpot-tune.yaml").write_text(TUNE)
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")

            def pending() -> dict[str, Any] | None:
                found = call_daemon(socket, "proposals")["proposals"]
                return found[0] if found else None

            proposal = eventually(pending, "a tuned proposal", daemon, 120)
            shown = cli(config, "proposals")
            explained = cli(config, "explain", "tpot-tune")
            approved = cli(config, "approve", proposal["id"])
            done = eventually(finished(short_tmp), "the change finished", daemon, 90)
            decisions = call_daemon(socket, "status")["recent_decisions"]

    assert proposal["policy"] == "tpot-tune"
    assert proposal["changes"] == {"max_num_batched_tokens": {"old": 8192.0, "new": 2048.0}}
    forecast = proposal["forecast"]
    assert forecast["after"]["goodput_rps"] > forecast["now"]["goodput_rps"]
    assert forecast["predicted_gain"] >= 0.10
    assert forecast["restart"]["downtime_s"] > 0
    assert 4.0 <= forecast["workload"]["rate_rps"] <= 12.0
    assert proposal["effect"].startswith("predicted SLO attainment ")
    assert shown.returncode == 0, shown.stderr
    assert "    predicted: predicted SLO attainment " in shown.stdout
    assert "    workload: " in shown.stdout
    assert explained.returncode == 0, explained.stderr
    assert "    what-if, " in explained.stdout
    assert "* 1024x2048" in explained.stdout  # the pick, marked in the candidates' table
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert done["state"] == "done", done
    assert "max-num-batched-tokens: 2048" in sim.vllm_yaml.read_text()
    assert [entry["state"] for entry in journal(short_tmp)] == ["done"]
    intents = [d for d in decisions if d["kind"] == "intent" and d["policy"] == "tpot-tune"]
    assert intents[0]["details"]["whatif"]["after"]["max_num_batched_tokens"] == 2048
