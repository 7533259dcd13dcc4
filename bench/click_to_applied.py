"""From an approval click to the change applied and verified on the simulated vLLM, by phase.

A real daemon (subprocess) watches a ``sim serve`` under supervisord with a saturating load; an
approval-risk policy proposes ``max_num_seqs`` 8 → 16; the click is ``vllm-governor approve
ID`` over the control socket (the same judgement as a Slack button). Phases, from the daemon's
own records: the click's round trip (judge: re-check and store), the wait for the actuation
runner, then the actuator's phases from the journal (write, drain, restart, ready, verify), and
the moment the proposal is recorded verified.

    .venv/bin/python -m bench.click_to_applied [--repeat 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.retune import approval_config, eventually, unix_user
from tests.support.supervised_sim import SATURATING_WORKLOAD, supervised_sim

ACTUATOR_PHASES = (
    "plan", "preflight", "baseline", "journal", "write", "drain", "restart", "ready", "verify",
)  # fmt: skip
PHASES = ("click", "queue", *ACTUATOR_PHASES, "record")


def measure_once(directory: Path, verify_window_s: float) -> dict[str, float]:
    """One proposal approved and applied; seconds per phase."""
    with supervised_sim(directory, "max-num-seqs: 8\n", load=SATURATING_WORKLOAD) as sim:
        config = approval_config(directory, sim, [unix_user()], verify_window_s=verify_window_s)
        socket = directory / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            proposal = eventually(
                lambda: next(iter(call_daemon(socket, "proposals")["proposals"]), None),
                "a proposal",
                daemon,
            )
            clicked = time.time()
            answer = call_daemon(socket, "approve", id=proposal["id"])
            answered = time.time()
            assert answer["accepted"], answer

            def verified() -> dict[str, Any] | None:
                [listed] = call_daemon(socket, "proposals")["proposals"]
                return listed if listed["state"] in ("verified", "reverted", "failed") else None

            listed = eventually(verified, "the outcome", daemon, 120)
            assert listed["state"] == "verified", listed
            entry = _entry(directory)
    started, finished, timings = entry
    phases = {"click": answered - clicked}
    for phase in ACTUATOR_PHASES:
        phases[phase] = float(timings.get(phase, 0.0))
    # The journal entry opens after plan, preflight and baseline: the rest is the runner's queue.
    before = sum(phases[p] for p in ("plan", "preflight", "baseline"))
    phases["queue"] = max(0.0, started - answered - before)
    phases["record"] = datetime.fromisoformat(listed["changed_at"]).timestamp() - finished
    phases["total"] = datetime.fromisoformat(listed["changed_at"]).timestamp() - clicked
    return phases


def _entry(directory: Path) -> tuple[float, float, dict[str, float]]:
    path = directory / "state" / "state.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        row = db.execute(
            "SELECT started_at, finished_at, timings FROM actuations ORDER BY id DESC LIMIT 1"
        ).fetchone()
    return float(row[0]), float(row[1]), json.loads(row[2])


def main() -> None:
    """Measure and print; optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="proposals approved, one per run")
    parser.add_argument("--verify-window", type=float, default=2.0, help="seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="vg-") as directory:
            runs.append(measure_once(Path(directory), args.verify_window))
    medians = {phase: statistics.median(run[phase] for run in runs) for phase in runs[0]}
    print(f"click to applied and verified, sim under supervisord, median of {len(runs)}")
    for phase in (*PHASES, "total"):
        print(f"  {phase:<10} {medians[phase]:>7.3f} s")
    governor = medians["click"] + medians["queue"] + medians["record"]
    print(f"approvals' own share (click + queue + record): {governor:.3f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": runs, "median": medians}, indent=2))


if __name__ == "__main__":
    main()
