"""The governor killed (SIGKILL) while the real vLLM drains on SIGTERM: one restart, a true journal.

vLLM 0.32 keeps its port open and ``/health`` at 200 while it drains, so to the next governor
the old process looks as if it still served on the old config; meanwhile the restart command,
which outlives the governor (a session of its own), is stopping it. The next governor must
wait for the replacement and finish the change, never journal "nothing restarted" nor issue
a second restart.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import running_daemon, write_config
from tests.support.real_vllm import HARD_STOP_S, READY_S, RealVllm
from tests.support.retune import eventually, finished, journal, step_reached

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(900)]

# Toggle between 8 and 16, whichever the server runs now.
TOGGLE = """\
name: toggle-seqs
targets: [real]
when: running >= 0.0
action:
  set: {max_num_seqs: "current == 8.0 ? 16.0 : 8.0"}
  risk: auto
cooldown: 1h
"""


def governor_config(directory: Path, server: RealVllm) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "toggle.yaml").write_text(TOGGLE)
    vllm = f"""
[[vllm]]
name = "real"
url = "{server.url}"
scrape_interval_s = 0.5
config_path = "{server.vllm_yaml}"
env_file = "{server.env_file}"
python = "{server.python}"
server_log_file = "{server.program_log}"
restart_command = {json.dumps(server.restart_command())}
restart_timeout_s = {HARD_STOP_S + 60}
ready_timeout_s = {READY_S}
verify_window_s = 3.0
verify_max_ttft_p95_ratio = 100.0
verify_max_preemption_rate_increase = 1000.0
[vllm.knobs.max_num_seqs]
min = 8
max = 16
max_step = 8
min_dwell_s = 0
hourly_budget = 5
"""
    config = write_config(directory, extra=vllm)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    text = text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.5\n")
    config.write_text(text + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n")
    return config


STOPPING = "waiting for vllm to stop"


def draining(directory: Path, server: RealVllm) -> Callable[[], dict[str, Any] | None]:
    """The journal says ``restarting`` and supervisord waits for the old vLLM to stop *now*.

    The shared server's supervisord log holds the stops of earlier tests: only a new line
    counts.
    """
    reached = step_reached(directory, "restarting")
    stops_before = server.supervisord_log().count(STOPPING)

    def check() -> dict[str, Any] | None:
        entry = reached()
        if entry is None or server.supervisord_log().count(STOPPING) <= stops_before:
            return None
        return entry

    return check


def test_a_governor_killed_while_vllm_drains_is_reconciled_without_a_second_restart(
    server: RealVllm, short_tmp: Path
) -> None:
    config = governor_config(short_tmp, server)
    spawns = server.spawns()
    # Long requests in flight make the drain last several seconds.
    in_drain = draining(short_tmp, server)
    with server.load(clients=6, requests_per_client=50, max_tokens=400) as load:
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1", timeout_s=120)
            eventually(in_drain, "the drain", daemon, timeout_s=240)
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait(timeout=10)
        load.stop()
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1", timeout_s=120)
            entry = eventually(finished(short_tmp), "the reconciliation", daemon, READY_S + 120)
    assert entry["state"] == "done", entry
    assert entry["steps"][-4:] == ["reconciling", "verifying", "verifying", "done"], entry["steps"]
    assert entry["facts"]["read_back"]["state"] == "confirmed", entry["facts"]["read_back"]
    assert server.spawns() == spawns + 1, "no restart twice for one decision"
    assert len(journal(short_tmp)) == 1, "one outcome"
    server.wait_ready(READY_S)
