"""Watching a daemon under attack: its watchdog pings, its peak memory, a healthy target's age.

The hostile-world tests (``tests/e2e/test_hostile_*.py``) attack a real daemon and judge it by
what an operator and systemd see: the watchdog pings keep coming, memory stays bounded, and a
healthy vLLM target beside the attack stays up with fresh signals. This module measures those
three, and :class:`Watch` keeps the figures so a test can assert on them and print them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon_paged
from daemon.core.errors import ControlError
from tests.support.daemon import RunningDaemon

# Armed at 4 s, the daemon pings every 2 s; a gap of 4 s is a ping systemd never got in time.
WATCHDOG_USEC = 4_000_000


@contextmanager
def watchdog_gaps(daemon: RunningDaemon) -> Iterator[list[float]]:
    """The gaps between the daemon's watchdog pings, heard by a thread while the body runs."""
    pings: list[float] = []
    gaps: list[float] = []
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            message = daemon.receive(0.2)
            if message is not None and "WATCHDOG=1" in message.splitlines():
                pings.append(time.monotonic())

    listener = threading.Thread(target=listen, name="watchdog listener", daemon=True)
    listener.start()
    try:
        yield gaps
    finally:
        done.set()
        listener.join(timeout=5)
        gaps.extend(later - earlier for earlier, later in itertools.pairwise(pings))


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def target_view(socket: Path, target: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The source ``vllm/<target>`` and its aggregate ``running`` row (None when absent)."""
    answer = call_daemon_paged(socket, "signals", "signals", prefix="running")
    source = next(entry for entry in answer["sources"] if entry["source"] == f"vllm/{target}")
    rows = [
        row
        for row in answer["signals"]
        if row["target"] == target and row["name"] == "running" and "engine" not in row["labels"]
    ]
    return source, rows[0] if rows else None


def wait_until_fresh(socket: Path, target: str, timeout_s: float = 20.0) -> None:
    """Wait for ``target``'s first fresh ``running`` (the first scrapes; a watch judges later)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            _, row = target_view(socket, target)
        except ControlError:
            row = None
        if row is not None and row["state"] == "ok":
            return
        time.sleep(0.2)
    raise AssertionError(f"{target} never became fresh within {timeout_s} s")


@dataclass
class Watch:
    """What was seen of a healthy target, and of the daemon, while it was under attack.

    Attributes:
        target: The healthy vLLM target watched.
        looks: How many times it was looked at.
        oldest_age_s: The oldest its ``running`` signal was at any look (its freshness).
        faults: Looks at which the target was not up and fresh, or the daemon did not answer.
        gaps: Gaps between watchdog pings, in seconds.
        peak_rss_mib: The daemon's peak RSS at the end of the watch.
    """

    target: str
    looks: int = 0
    oldest_age_s: float = 0.0
    faults: list[str] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    peak_rss_mib: float = 0.0

    def look(self, socket: Path) -> None:
        """Look once at the target through the control socket and note what is wrong."""
        self.looks += 1
        try:
            source, row = target_view(socket, self.target)
        except ControlError as exc:
            self.faults.append(f"no answer: {exc}")
            return
        if row is not None and row["age_s"] is not None:
            self.oldest_age_s = max(self.oldest_age_s, row["age_s"])
        if source["state"] != "up" or row is None or row["state"] != "ok":
            state = None if row is None else row["state"]
            self.faults.append(f"{source['state']}: {source.get('last_error')}, signal {state}")

    @property
    def worst_gap_s(self) -> float:
        """The longest wait between two watchdog pings."""
        return max(self.gaps, default=0.0)

    def summary(self, attack: str) -> str:
        """One line of figures for the test's output."""
        return (
            f"{attack}: watchdog worst gap {self.worst_gap_s:.2f} s over {len(self.gaps)} gaps;"
            f" peak RSS {self.peak_rss_mib:.1f} MiB; {self.target} oldest sample"
            f" {self.oldest_age_s:.2f} s over {self.looks} looks; {len(self.faults)} faults"
        )

    def assert_healthy_served(self) -> None:
        """The daemon pinged in time all along and the healthy target stayed up and fresh."""
        missed = [round(gap, 1) for gap in self.gaps if gap >= WATCHDOG_USEC / 1e6]
        assert len(self.gaps) >= 3, "the watchdog was heard all along"
        assert not missed, f"watchdog pings came too late: gaps of {missed} s"
        assert self.looks >= 3, "the healthy target was looked at all along"
        assert not self.faults, f"{self.target} was not up and fresh throughout: {self.faults[:5]}"


@contextmanager
def watching(daemon: RunningDaemon, target: str) -> Iterator[Watch]:
    """Hear the watchdog while the body runs; the body calls :meth:`Watch.look` as it goes."""
    watch = Watch(target)
    with watchdog_gaps(daemon) as gaps:
        yield watch
    watch.gaps = gaps
    watch.peak_rss_mib = peak_rss_mib(daemon.process.pid)
