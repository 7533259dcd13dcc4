"""The table of source kinds is the one place a polling source is registered.

A kind's entry gives both its signals (to the registry, so that policies may read them) and
how it is built from the configuration (to the signal plane, which runs it and restarts it on
a reload); nothing else names the polling sources.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest
from prometheus_client import CollectorRegistry

from daemon.core.clock import SystemClock
from daemon.core.config_files import parse_config
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import Readiness
from daemon.sources.declarations import SignalDeclaration
from daemon.sources.kinds import SOURCE_KINDS, SourceKind, planned_sources
from daemon.sources.polling import PlannedSource, PollResult
from daemon.sources.registry import BUILTIN, signal_registry
from daemon.sources.samples import Sample, SeriesKey

# Every polling source on: two vLLM servers with gates, the host, Prometheus with a query.
# NVML's library is absent, so it builds nothing (and warns), whatever this machine has.
_ALL_ON = """
[sources.nvml]
enabled = true
library_path = "/nonexistent/libnvidia-ml.so.1"
[sources.host]
enabled = true
[sources.prometheus]
enabled = true
queries = { cluster_queue_depth = "sum(vllm:num_requests_waiting)" }
[[vllm]]
name = "main"
url = "http://127.0.0.1:8000"
[vllm.gate]
enabled = true
stats_socket = "127.0.0.1:9999"
[[vllm]]
name = "second"
url = "http://127.0.0.1:8001"
[vllm.gate]
enabled = true
stats_socket = "127.0.0.1:9998"
"""


def _config(text: str) -> GovernorConfig:
    return parse_config(text, Path("config.toml"))


def test_every_built_in_signal_comes_from_a_kind_of_the_table_or_the_governor() -> None:
    declared_by_kinds = {d.source for kind in SOURCE_KINDS for d in kind.declarations}
    assert {d.source for d in BUILTIN} - declared_by_kinds == {"governor"}
    assert len({kind.key_path for kind in SOURCE_KINDS}) == len(SOURCE_KINDS)


def test_each_kind_builds_its_sources_from_the_configuration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _config(_ALL_ON)
    built = {kind.key_path: [p.source.name for p in kind.build(config)] for kind in SOURCE_KINDS}
    assert built == {
        "vllm": ["vllm/main", "vllm/second"],
        "vllm.gate": ["haproxy-main", "haproxy-second"],
        "sources.nvml": [],
        "sources.host": ["host"],
        "sources.prometheus": ["prometheus"],
    }
    # The configured kind declares its query, and the plan is the table's, kind by kind.
    assert "no NVIDIA driver: NVML signals disabled" in caplog.messages
    assert signal_registry(config).get("cluster_queue_depth") is not None
    names = [p.source.name for p in planned_sources(config)]
    assert names == [name for sources in built.values() for name in sources]


class _Uptime:
    """A toy polling source, as a new kind would add one: one scalar, always the same."""

    name = "uptime"
    interval_s = 3600.0
    timeout_s = 1.0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def poll(self, now: float) -> PollResult:
        return PollResult((Sample(SeriesKey("host_uptime_s"), 1234.0, now, self.name),))


def _uptime_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    if config.sources.host.enabled:
        yield PlannedSource(_Uptime(), 7.0, config.sources.host)


_UPTIME = SourceKind(
    "sources.uptime",
    (SignalDeclaration("host_uptime_s", "uptime", "Seconds since boot", "seconds"),),
    _uptime_sources,
)


@pytest.mark.asyncio
async def test_a_kind_added_to_the_table_is_declared_built_and_read() -> None:
    config = _config("[sources.nvml]\nenabled = false\n")
    kinds = (*SOURCE_KINDS, _UPTIME)
    assert BUILTIN.get("host_uptime_s") is None
    uptime = signal_registry(config, kinds=kinds).get("host_uptime_s")
    assert uptime is not None
    assert uptime.source == "uptime"

    plane = SignalPlane(config, SystemClock(), CollectorRegistry(), kinds=kinds)
    assert plane.stale_after("uptime") == 7.0
    (sources,) = plane.tasks()
    readiness = Readiness()

    async def run() -> None:
        await sources.run(readiness)

    task = asyncio.create_task(run())
    try:
        await readiness.wait()  # each source has made its first attempt
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    rows = [row for row in plane.rows(others_too=True) if row.name == "host_uptime_s"]
    assert [(row.value, row.source, row.state) for row in rows] == [(1234.0, "uptime", "ok")]
