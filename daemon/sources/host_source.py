"""The host source: disk usage of configured paths, load average and the number of CPUs.

Disk usage is computed as ``df`` shows it: blocks reserved for root count neither as used nor
as available, so ``host_disk_usage_ratio`` reaches 1.0 when ordinary processes (vLLM writing
logs) can write no more. Signals: ``host_disk_usage_ratio``, ``host_disk_used_bytes``,
``host_disk_available_bytes`` and ``host_disk_total_bytes``, labelled ``path``;
``host_load1``, ``host_load5``, ``host_load15`` and ``host_cpu_count`` (to normalise the load).

A directory with a byte budget (``dir_budgets``) is read as a volume of the budget's size,
as a directory quota (an XFS project quota) makes ``df`` show it: used is the size of the
files under it, total the budget, available what is left of it (never below 0), and the ratio
used over budget, which passes 1.0 when the directory has outgrown its budget. It is for a log
directory that shares its file system with other things: its own share, not the volume's.

A path that cannot be read has no series (absent, never zero) and is logged once per change,
not at every poll; the poll fails only when nothing at all could be read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from daemon.core.errors import SourceError
from daemon.sources.blocking_calls import OneCallAtATime
from daemon.sources.declarations import SignalDeclaration
from daemon.sources.domains import COUNT, NON_NEGATIVE
from daemon.sources.polling import PlannedSource, PollResult
from daemon.sources.samples import Sample, SeriesKey, labels_of

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

log = logging.getLogger(__name__)

DECLARATIONS = (
    SignalDeclaration(
        "host_disk_usage_ratio",
        "host",
        "Share of the disk in use as df shows it, 0-1",
        "ratio",
        key="path",
    ),
    SignalDeclaration(
        "host_disk_available_bytes",
        "host",
        "Bytes ordinary processes can still write",
        "bytes",
        key="path",
    ),
    SignalDeclaration("host_disk_used_bytes", "host", "Bytes in use", "bytes", key="path"),
    SignalDeclaration("host_disk_total_bytes", "host", "Size of the disk", "bytes", key="path"),
    *(
        SignalDeclaration(
            f"host_load{m}",
            "host",
            f"Load average over {m} minute(s)",
            declared_domain=NON_NEGATIVE,
        )
        for m in (1, 5, 15)
    ),
    SignalDeclaration(
        "host_cpu_count",
        "host",
        "CPUs of the host (to normalise the load)",
        declared_domain=COUNT,
    ),
)


@dataclass(frozen=True, slots=True)
class _Reading:
    values: dict[SeriesKey, float]
    failures: dict[Path, str]  # path -> why it could not be read
    load_error: str | None


class HostSource:
    """Polls the local host."""

    name = "host"

    def __init__(
        self,
        interval_s: float,
        timeout_s: float,
        disk_paths: tuple[Path, ...],
        dir_budgets: Mapping[Path, int] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.disk_paths = disk_paths
        self.dir_budgets = dict(dir_budgets or {})
        # A stuck statvfs (a dead network mount) must not pile up threads.
        self._calls = OneCallAtATime("statvfs")
        self._failing: set[Path] = set()

    async def __aenter__(self) -> Self:
        """Nothing to open."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to close."""

    async def poll(self, now: float) -> PollResult:
        """Read every path and the load average; fail only if nothing could be read."""
        reading = await self._calls.run(self._read)
        self._log_changes(reading.failures)
        if not reading.values:
            problems = [f"{path}: {why}" for path, why in reading.failures.items()]
            problems.append(f"load average: {reading.load_error}")
            raise SourceError("; ".join(problems), detail="unreadable")
        samples = tuple(Sample(key, value, now, self.name) for key, value in reading.values.items())
        return PollResult(samples, "some-paths-unreadable" if reading.failures else "")

    def _read(self) -> _Reading:
        values: dict[SeriesKey, float] = {}
        failures: dict[Path, str] = {}
        for path in self.disk_paths:
            try:
                values.update(_disk_values(path))
            except OSError as exc:
                failures[path] = exc.strerror or str(exc)
        for path, budget in self.dir_budgets.items():
            try:
                values.update(_budget_values(path, budget))
            except OSError as exc:
                failures[path] = exc.strerror or str(exc)
        load_error = None
        try:
            load = os.getloadavg()
        except OSError as exc:
            load_error = exc.strerror or str(exc)
        else:
            for minutes, value in zip((1, 5, 15), load, strict=True):
                values[SeriesKey(f"host_load{minutes}")] = value
            # Every CPU of the host, not only those this process may use: the load average
            # counts runnable tasks host-wide.
            cpus = os.cpu_count()
            if cpus is not None:
                values[SeriesKey("host_cpu_count")] = float(cpus)
        return _Reading(values, failures, load_error)

    def _log_changes(self, failures: dict[Path, str]) -> None:
        for path, why in failures.items():
            if path not in self._failing:
                log.warning("disk path unreadable", extra={"path": str(path), "error": why})
        for path in self._failing - failures.keys():
            log.info("disk path readable again", extra={"path": str(path)})
        self._failing = set(failures)


def _disk_values(path: Path) -> dict[SeriesKey, float]:
    stats = os.statvfs(path)
    used = (stats.f_blocks - stats.f_bfree) * stats.f_frsize
    available = stats.f_bavail * stats.f_frsize
    labels = labels_of({"path": str(path)})
    values = {
        SeriesKey("host_disk_used_bytes", labels): float(used),
        SeriesKey("host_disk_available_bytes", labels): float(available),
        SeriesKey("host_disk_total_bytes", labels): float(stats.f_blocks * stats.f_frsize),
    }
    # Pseudo file systems have no blocks at all: their usage is unknown, not zero.
    if used + available > 0:
        values[SeriesKey("host_disk_usage_ratio", labels)] = used / (used + available)
    return values


def _budget_values(path: Path, budget: int) -> dict[SeriesKey, float]:
    used = _tree_bytes(path)
    labels = labels_of({"path": str(path)})
    return {
        SeriesKey("host_disk_used_bytes", labels): float(used),
        SeriesKey("host_disk_available_bytes", labels): float(max(0, budget - used)),
        SeriesKey("host_disk_total_bytes", labels): float(budget),
        SeriesKey("host_disk_usage_ratio", labels): used / budget,
    }


def _tree_bytes(path: Path) -> int:
    """The size of the regular files under ``path`` (symbolic links not followed).

    Raises:
        OSError: ``path`` itself cannot be read (a file that vanishes meanwhile is skipped).
    """
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    total += _tree_bytes(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue  # rotated away between the listing and the look
    return total


def planned_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    """The host source when ``[sources.host]`` is enabled, restarted when the section changes."""
    host = config.sources.host
    if host.enabled:
        machine = HostSource(host.interval_s, host.timeout_s, host.disk_paths, host.dir_budgets)
        yield PlannedSource(machine, host.stale_after_s, host)
