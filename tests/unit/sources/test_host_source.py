from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from daemon.core.errors import SourceError
from daemon.core.settings import HostSourceSection
from daemon.sources.host_source import HostSource
from daemon.sources.polling import PollResult

LOGGER = "daemon.sources.host_source"


def _by_name(result: PollResult, path: Path | None = None) -> dict[str, float]:
    wanted = None if path is None else str(path)
    return {s.key.name: s.value for s in result.samples if s.key.label("path") == wanted}


@pytest.mark.asyncio
async def test_disk_usage_is_computed_as_df_does(tmp_path: Path) -> None:
    async with HostSource(10.0, 2.0, (tmp_path,)) as source:
        result = await source.poll(3.0)
    stats = os.statvfs(tmp_path)
    disk = _by_name(result, tmp_path)
    # Reserved blocks are neither used nor available, so used + available <= total.
    used = (stats.f_blocks - stats.f_bfree) * stats.f_frsize
    available = stats.f_bavail * stats.f_frsize
    assert disk["host_disk_total_bytes"] == stats.f_blocks * stats.f_frsize
    # The file system is live: allow for other writers between the two statvfs calls.
    assert disk["host_disk_used_bytes"] == pytest.approx(used, rel=0.01)
    assert disk["host_disk_available_bytes"] == pytest.approx(available, rel=0.01)
    assert 0.0 <= disk["host_disk_usage_ratio"] <= 1.0
    assert disk["host_disk_usage_ratio"] == pytest.approx(
        disk["host_disk_used_bytes"]
        / (disk["host_disk_used_bytes"] + disk["host_disk_available_bytes"])
    )
    assert {(s.at, s.source) for s in result.samples} == {(3.0, "host")}
    assert result.detail == ""


@pytest.mark.asyncio
async def test_load_average_comes_with_the_cpu_count() -> None:
    async with HostSource(10.0, 2.0, ()) as source:
        host = _by_name(await source.poll(1.0))
    assert set(host) == {"host_load1", "host_load5", "host_load15", "host_cpu_count"}
    assert host["host_cpu_count"] == os.cpu_count()
    assert all(host[name] >= 0.0 for name in ("host_load1", "host_load5", "host_load15"))


@pytest.mark.asyncio
async def test_a_missing_path_is_absent_and_logged_once_per_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    present, missing = tmp_path / "logs", tmp_path / "models"
    present.mkdir()
    async with HostSource(10.0, 2.0, (present, missing)) as source:
        results = [await source.poll(float(now)) for now in range(3)]
        missing.mkdir()
        recovered = await source.poll(3.0)
        await source.poll(4.0)
    for result in results:
        assert result.detail == "some-paths-unreadable"
        assert _by_name(result, missing) == {}
        assert "host_disk_usage_ratio" in _by_name(result, present)
        assert "host_load1" in _by_name(result)
    assert recovered.detail == ""
    assert "host_disk_usage_ratio" in _by_name(recovered, missing)
    assert [(r.levelname, r.getMessage(), getattr(r, "path", "")) for r in caplog.records] == [
        ("WARNING", "disk path unreadable", str(missing)),
        ("INFO", "disk path readable again", str(missing)),
    ]


@pytest.mark.asyncio
async def test_the_poll_fails_only_when_nothing_can_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_load_average() -> tuple[float, float, float]:
        raise OSError(0, "load average unobtainable")

    # Real hosts always have a load average; only a container without /proc lacks one.
    monkeypatch.setattr(os, "getloadavg", no_load_average)
    async with HostSource(10.0, 2.0, (tmp_path / "gone",)) as source:
        with pytest.raises(SourceError, match="gone: No such file or directory") as failed:
            await source.poll(1.0)
        assert failed.value.detail == "unreadable"
    async with HostSource(10.0, 2.0, (tmp_path,)) as source:
        disk = _by_name(await source.poll(2.0), tmp_path)
    assert "host_disk_usage_ratio" in disk


@pytest.mark.asyncio
async def test_a_directory_with_a_budget_reads_as_a_volume_of_that_size(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "rotated").mkdir(parents=True)
    (logs / "vllm.log").write_bytes(b"x" * 3_000)
    (logs / "rotated" / "vllm.log.1").write_bytes(b"x" * 5_000)
    # A link is not followed: what it points at is not the directory's.
    (logs / "elsewhere").symlink_to(tmp_path)
    async with HostSource(10.0, 2.0, (), {logs: 10_000}) as source:
        before = _by_name(await source.poll(1.0), logs)
        (logs / "vllm.log").write_bytes(b"x" * 7_000)
        after = _by_name(await source.poll(2.0), logs)
    assert before == {
        "host_disk_used_bytes": 8_000.0,
        "host_disk_available_bytes": 2_000.0,
        "host_disk_total_bytes": 10_000.0,
        "host_disk_usage_ratio": 0.8,
    }
    # Outgrown: the ratio passes 1.0 and nothing is left, never a negative amount.
    assert after["host_disk_usage_ratio"] == pytest.approx(1.2)
    assert after["host_disk_available_bytes"] == 0.0


def test_a_path_is_read_one_way_only() -> None:
    with pytest.raises(ValidationError, match="in both disk_paths and dir_budgets"):
        HostSourceSection(disk_paths=(Path("/var/log"),), dir_budgets={Path("/var/log"): 10})
