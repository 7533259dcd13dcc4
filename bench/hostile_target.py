"""Freshness of a healthy vLLM target while another target trickles its /metrics (slowloris).

The daemon runs with two ``[[vllm]]`` targets at their default scrape settings (every 2 s,
1.5 s to answer, stale after 10 s): one healthy (the fixture exporter), one that answers its
headers and then one byte of the page per second. Sampled twice a second over the window:
the healthy target's source state and the age of its ``running`` signal. Then SIGTERM: the
exit status and how long the stop took.

    .venv/bin/python -m bench.hostile_target [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HostileServer, ok_head, trickle

PAGE = Path(__file__).resolve().parents[1] / "tests/fixtures/vllm-metrics/v0.33-synthesized.txt"


@dataclass
class Outcome:
    """What the healthy target looked like under attack, and how the daemon stopped."""

    seconds: float
    samples: int
    healthy_down_samples: int
    first_down_after_s: float | None
    max_signal_age_s: float | None
    stale_samples: int
    hostile_connections: int
    hostile_max_in_flight: int
    exit_status: int | None
    stop_s: float


def measure(seconds: float) -> Outcome:
    """Run the daemon against both targets for ``seconds`` and sample the healthy one."""
    page = PAGE.read_bytes()
    slowloris = trickle(ok_head(len(page)), page, bytes_per_s=1.0)
    with (
        tempfile.TemporaryDirectory(prefix="vg-") as scratch,
        FixtureExporter(Script(metrics=page)) as healthy,
        HostileServer(slowloris) as hostile,
    ):
        extra = "".join(
            f'[[vllm]]\nname = "{name}"\nurl = "{url}"\n'
            for name, url in (("healthy", healthy.base_url), ("hostile", hostile.base_url))
        )
        config = write_config(Path(scratch), extra=extra, deadline_s=5.0)
        socket = Path(scratch) / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            time.sleep(3.0)  # the first scrapes
            started = time.monotonic()
            down, stale, samples, first_down, ages = 0, 0, 0, None, []
            while (elapsed := time.monotonic() - started) < seconds:
                answer = call_daemon(socket, "signals", prefix="running")
                source = next(s for s in answer["sources"] if s["source"] == "vllm/healthy")
                row = next(
                    r
                    for r in answer["signals"]
                    if r["target"] == "healthy" and "engine" not in r["labels"]
                )
                samples += 1
                if source["state"] != "up":
                    down += 1
                    first_down = elapsed if first_down is None else first_down
                stale += row["state"] != "ok"
                if row["age_s"] is not None:
                    ages.append(row["age_s"])
                time.sleep(0.5)
            daemon.signal(signal.SIGTERM)
            stopping = time.monotonic()
            try:
                status: int | None = daemon.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                status = None
            stop_s = time.monotonic() - stopping
        return Outcome(
            seconds=seconds,
            samples=samples,
            healthy_down_samples=down,
            first_down_after_s=None if first_down is None else round(first_down, 1),
            max_signal_age_s=max(ages, default=None),
            stale_samples=stale,
            hostile_connections=hostile.connections,
            hostile_max_in_flight=hostile.max_in_flight,
            exit_status=status,
            stop_s=round(stop_s, 2),
        )


def main() -> None:
    """Measure and print the outcome as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(json.dumps(asdict(measure(args.seconds)), indent=2))


if __name__ == "__main__":
    main()
