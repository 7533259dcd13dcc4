"""Freshness of a healthy vLLM target while another target attacks the daemon.

The daemon runs with two ``[[vllm]]`` targets at their default scrape settings (every 2 s,
1.5 s to answer, stale after 10 s): one healthy (the fixture exporter), one hostile:

* ``slowloris``: answers its headers and then one byte of the page per second;
* ``cardinality``: a page with ``--series`` distinct label values of a known vLLM gauge (a
  request id put into a label), new values at every scrape with ``--rotate``.

Sampled twice a second over the window: the healthy target's source state and the age of its
``running`` signal, how long ``status`` takes over the control socket, the gaps between
watchdog pings (armed at 2 s, so a ping is due every second: a gap beyond that is time the
event loop was held), and the daemon's peak RSS. Then SIGTERM: the exit status and how long
the stop took.

    .venv/bin/python -m bench.hostile_target [--seconds 60] [--attack cardinality --series 100000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import subprocess
import tempfile
import threading
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from daemon.app.control_client import call_daemon, call_daemon_paged
from daemon.core.errors import ControlError
from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HostileServer, cardinality_bomb, ok_head, trickle

PAGE = Path(__file__).resolve().parents[1] / "tests/fixtures/vllm-metrics/v0.33-synthesized.txt"


WATCHDOG_USEC = 2_000_000  # a ping every second


@dataclass
class Outcome:
    """What the healthy target looked like under attack, and how the daemon stopped."""

    attack: str
    seconds: float
    samples: int
    healthy_down_samples: int
    first_down_after_s: float | None
    max_signal_age_s: float | None
    stale_samples: int
    signals_failed: int
    max_status_s: float
    max_watchdog_gap_s: float
    peak_rss_mb: float
    hostile_state: str
    hostile_detail: str
    store_series: int
    exit_status: int | None
    stop_s: float


@dataclass
class _Watch:
    """Watchdog pings heard, with when, read by a thread while the bench samples."""

    daemon: RunningDaemon
    pings: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.daemon.receive(0.2)
            if message is not None and "WATCHDOG=1" in message.splitlines():
                self.pings.append(time.monotonic())

    def max_gap_s(self) -> float:
        gaps = [later - earlier for earlier, later in itertools.pairwise(self.pings)]
        return round(max(gaps, default=0.0), 2)


@contextmanager
def _hostile_target(attack: str, series: int, rotate: bool) -> Iterator[str]:
    """The hostile server's base URL while it runs."""
    page = PAGE.read_bytes()
    if attack == "slowloris":
        with HostileServer(trickle(ok_head(len(page)), page, bytes_per_s=1.0)) as slowloris:
            yield slowloris.base_url
        return
    script = Script(metrics=cardinality_bomb(page, series))
    stop = threading.Event()

    def rotate_values() -> None:
        offset = 0
        while not stop.wait(2.0):
            offset += series
            script.metrics = cardinality_bomb(page, series, offset=offset)

    rotator = threading.Thread(target=rotate_values, daemon=True)
    with FixtureExporter(script) as server:
        if rotate:
            rotator.start()
        try:
            yield server.base_url
        finally:
            stop.set()


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def measure(
    seconds: float,
    attack: str = "slowloris",
    series: int = 0,
    rotate: bool = False,
    hostile_settings: str = "",
) -> Outcome:
    """Run the daemon against both targets for ``seconds`` and sample the healthy one."""
    page = PAGE.read_bytes()
    with (
        tempfile.TemporaryDirectory(prefix="vg-") as scratch,
        FixtureExporter(Script(metrics=page)) as healthy,
        _hostile_target(attack, series, rotate) as hostile_url,
    ):
        extra = (
            "".join(
                f'[[vllm]]\nname = "{name}"\nurl = "{url}"\n'
                for name, url in (("healthy", healthy.base_url), ("hostile", hostile_url))
            )
            + hostile_settings.replace(";", "\n")
            + "\n"
        )
        config = write_config(Path(scratch), extra=extra, deadline_s=5.0)
        socket = Path(scratch) / "control.sock"
        with running_daemon(config, watchdog_usec=WATCHDOG_USEC) as daemon:
            daemon.wait_for("READY=1")
            watch = _Watch(daemon)
            listener = threading.Thread(target=watch.run, daemon=True)
            listener.start()
            time.sleep(3.0)  # the first scrapes
            started = time.monotonic()
            down, stale, samples, first_down, ages, status_s = 0, 0, 0, None, [], [0.0]
            hostile: dict[str, str] = {}
            signals_failed = 0
            while (elapsed := time.monotonic() - started) < seconds:
                asked = time.monotonic()
                call_daemon(socket, "status", timeout_s=60.0)
                status_s.append(time.monotonic() - asked)
                try:
                    answer = call_daemon_paged(socket, "signals", "signals", prefix="running")
                except ControlError:
                    signals_failed += 1
                    time.sleep(0.5)
                    continue
                sources = {s["source"]: s for s in answer["sources"]}
                source, hostile = sources["vllm/healthy"], sources["vllm/hostile"]
                rows = [
                    r
                    for r in answer["signals"]
                    if r["target"] == "healthy" and "engine" not in r["labels"]
                ]
                samples += 1
                if source["state"] != "up":
                    down += 1
                    first_down = elapsed if first_down is None else first_down
                stale += not rows or rows[0]["state"] != "ok"
                if rows and rows[0]["age_s"] is not None:
                    ages.append(rows[0]["age_s"])
                time.sleep(0.5)
            store_series = _store_series(config)
            peak_rss_mb = _peak_rss_mb(daemon.process.pid)
            daemon.signal(signal.SIGTERM)
            stopping = time.monotonic()
            try:
                status: int | None = daemon.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                status = None
            stop_s = time.monotonic() - stopping
            watch.stop.set()
            listener.join(timeout=5)
        return Outcome(
            attack=attack if attack == "slowloris" else f"{attack} {series}{' rotating' * rotate}",
            seconds=seconds,
            samples=samples,
            healthy_down_samples=down,
            first_down_after_s=None if first_down is None else round(first_down, 1),
            max_signal_age_s=max(ages, default=None),
            stale_samples=stale,
            signals_failed=signals_failed,
            max_status_s=round(max(status_s), 2),
            max_watchdog_gap_s=watch.max_gap_s(),
            peak_rss_mb=peak_rss_mb,
            hostile_state=hostile.get("state", ""),
            hostile_detail=hostile.get("last_error") or hostile.get("detail", ""),
            store_series=store_series,
            exit_status=status,
            stop_s=round(stop_s, 2),
        )


def _store_series(config: Path) -> int:
    """Series the store holds, from the daemon's own metrics endpoint."""
    port = tomllib.loads(config.read_text())["metrics"]["listen_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("vllm_governor_signal_series "):
                return int(float(line.split()[1]))
    return -1


def main() -> None:
    """Measure and print the outcome as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--attack", choices=("slowloris", "cardinality"), default="slowloris")
    parser.add_argument("--series", type=int, default=100_000, help="distinct label values")
    parser.add_argument("--rotate", action="store_true", help="new label values every 2 s")
    parser.add_argument(
        "--hostile-settings",
        default="",
        help="extra keys of the hostile [[vllm]] table, ';'-separated (max_label_values = 10000)",
    )
    args = parser.parse_args()
    outcome = measure(args.seconds, args.attack, args.series, args.rotate, args.hostile_settings)
    print(json.dumps(asdict(outcome), indent=2))


if __name__ == "__main__":
    main()
