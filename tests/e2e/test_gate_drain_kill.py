"""A governor killed while its change holds the gate drained: the next one lets requests in again.

A gate left draining refuses every request for as long as nobody notices, which is worse than
the restart it prepared. The drain is a fact of the journal entry, written before the command,
so the next governor lifts it when it ends the change. Real daemon processes, a real HAProxy on
the reference config in front of ``sim serve`` under supervisord.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.daemon import running_daemon
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.retune import eventually, finished, governor_config, step_reached, write_policy
from tests.support.services import free_port, require_command
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.service("haproxy"), pytest.mark.slow]


def test_a_gate_left_draining_by_a_dead_governor_admits_again_after_the_next_one_reconciles(
    short_tmp: Path,
) -> None:
    with supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim:
        socket_path = short_tmp / "haproxy.sock"
        rendered = render_reference_config(
            frontend_port=free_port(),
            server_port=sim.port,
            stats_socket=socket_path,
            maxconn=8,
            check_inter="200ms",
        )
        with Haproxy(require_command("haproxy"), short_tmp, rendered, socket_path) as haproxy:
            config = governor_config(short_tmp, sim)
            gate = f'[vllm.gate]\nenabled = true\nstats_socket = "{socket_path}"\n'
            text = config.read_text().replace(
                "[vllm.knobs.max_num_seqs]", f"{gate}[vllm.knobs.max_num_seqs]"
            )
            config.write_text(text)
            write_policy(short_tmp, "running >= 0.0")
            hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": "drained:60"}
            with running_daemon(config, env=hold) as daemon:
                daemon.wait_for("READY=1")
                entry = eventually(step_reached(short_tmp, "drained"), "the drain", daemon)
                assert entry["facts"]["gate_held"] == f"{socket_path} {BACKEND}/{SERVER}"
                assert haproxy.stat(BACKEND, SERVER)["status"] == "DRAIN"
                daemon.process.send_signal(signal.SIGKILL)
                daemon.process.wait(timeout=10)
            assert haproxy.stat(BACKEND, SERVER)["status"] == "DRAIN", "left by the dead one"
            with running_daemon(config) as daemon:
                daemon.wait_for("READY=1")
                entry = eventually(finished(short_tmp), "the reconciliation", daemon)
            assert entry["state"] == "abandoned", entry
            assert entry["facts"]["gate_held"] is None
            assert entry["facts"]["gate_admitted"] == "UP"
            assert "admits again" in entry["outcome"], entry["outcome"]
            assert haproxy.stat(BACKEND, SERVER)["status"] == "UP"
            assert sim.spawns() == 1, "nothing was restarted"
