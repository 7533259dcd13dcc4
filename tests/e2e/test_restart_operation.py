"""A policy's ``operation: restart``: the daemon restarts a ``sim serve`` on its config in force.

Journaled like a change (drain, restart, ready, verify), never with a file written, and held to
the instance's restart envelope: a second policy asking at the same moment is refused, not run
twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.retune import eventually, governor_config, journal
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow]

RESTART = """\
name: {name}
targets: [sim]
when: waiting >= 0.0
action: {{operation: restart, risk: auto}}
cooldown: 1h
"""


def test_a_restart_operation_restarts_once_on_the_same_config(short_tmp: Path) -> None:
    with supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim:
        config = governor_config(short_tmp, sim)
        before = sim.vllm_yaml.read_text(), sim.env_file.read_text()
        for name in ("restart-a", "restart-b"):
            (short_tmp / "policies" / f"{name}.yaml").write_text(RESTART.format(name=name))
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")

            def both_finished() -> list[dict[str, object]] | None:
                entries = journal(short_tmp)
                done = [e for e in entries if e["state"] != "open"]
                return done if len(done) == 2 else None

            entries = eventually(both_finished, "both restarts answered", daemon)
            status = call_daemon(short_tmp / "control.sock", "status")
        states = sorted(str(entry["state"]) for entry in entries)
        assert states == ["done", "refused"], entries
        [done] = [entry for entry in entries if entry["state"] == "done"]
        [refused] = [entry for entry in entries if entry["state"] == "refused"]
        assert done["steps"] == [
            "planned", "written", "drained", "restarting", "restarted", "ready",
            "verifying", "verifying", "done",
        ]  # fmt: skip
        assert "restarted on the config in force" in str(done["outcome"])
        assert "refused (dwell)" in str(refused["outcome"]), refused
        assert "restart_min_interval_s 900" in str(refused["outcome"])
        assert sim.spawns() == 2, "one restart, for one decision"
        assert (sim.vllm_yaml.read_text(), sim.env_file.read_text()) == before
        assert sim.get("/health") == (200, "")
        assert status["quarantined"] == []
