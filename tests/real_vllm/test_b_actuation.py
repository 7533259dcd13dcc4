"""The actuation protocol against a real vLLM 0.32 under a real service manager (supervisord).

Each change reads the config it finds (the tier shares one server), makes it, and checks what
the *running server* says it runs with: vLLM's own start-up line, read back from its output.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from actuators.vllm.actuator import VllmActuator
from actuators.vllm.config_text import read_yaml_options
from actuators.vllm.registry import V0_32, VersionRegistry
from daemon.api import DONE, REVERTED, ChangeRequest, Envelope, SystemClock, VllmInstance
from daemon.core.gate_settings import GateSettings
from daemon.engine.actuation.haproxy_gate import gate_of
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.completions_load import Outcome
from tests.support.haproxy import BACKEND, SERVER, StatusWatch, gate_in_front
from tests.support.live_windows import live_windows
from tests.support.real_vllm import HARD_STOP_S, READY_S, RealVllm
from tests.support.tasks import eventually

pytestmark = [
    pytest.mark.real_vllm,
    pytest.mark.service("haproxy"),
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

FORWARD = ["planned", "written", "drained", "restarting", "restarted", "ready", "verifying"]
OPEN = Envelope(min=1, max=4096, max_step=4096, min_dwell_s=0, hourly_budget=20)


def instance_of(server: RealVllm) -> VllmInstance:
    """The server as a governor on its host is configured to retune it."""
    return VllmInstance(
        name="real",
        url=server.url,
        scrape_interval_s=0.5,
        config_path=server.vllm_yaml,
        env_file=server.env_file,
        restart_command=server.restart_command(),
        python=server.python,
        server_log_file=server.program_log,
        # The restart waits out vLLM's drain and the service manager's hard stop.
        restart_timeout_s=HARD_STOP_S + 60.0,
        ready_timeout_s=READY_S,
        verify_window_s=3.0,
        # These tests are about the protocol; the verdict on signals has tests of its own.
        verify_max_ttft_p95_ratio=100.0,
        verify_max_preemption_rate_increase=1000.0,
        knobs={
            "max_num_seqs": OPEN,
            "max_num_batched_tokens": OPEN,
            "log_level": Envelope(min=10, max=40, max_step=30, min_dwell_s=0, hourly_budget=20),
        },
    )


def knob(server: RealVllm, key: str) -> Any:
    return read_yaml_options(server.vllm_yaml.read_text(), "vllm.yaml")[key]


def stated(server: RealVllm) -> dict[str, Any]:
    """The last ``non-default args`` line the real server logged."""
    lines = re.findall(r"non-default args: (\{.*\})", server.output())
    assert lines, server.output()[-3000:]
    value: dict[str, Any] = ast.literal_eval(lines[-1])
    return value


def steps_of(journal: SqliteJournal, entry_id: int | None) -> list[str]:
    assert entry_id is not None
    return [step for _, step in journal.steps(entry_id)]


@pytest.mark.asyncio
async def test_max_num_seqs_16_to_8_is_drained_restarted_and_read_back(
    server: RealVllm, short_tmp: Path
) -> None:
    instance = instance_of(server)
    before = int(knob(server, "max-num-seqs"))
    wanted = 8 if before != 8 else 16
    spawns = server.spawns()
    journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
    # Long requests keep the drain busy; short ones keep arriving and meet it.
    long = server.load(clients=4, requests_per_client=3, max_tokens=300)
    short = server.load(clients=2, requests_per_client=400, max_tokens=8)
    async with live_windows(instance) as windows:
        actuator = VllmActuator(journal, windows, SystemClock(), short_tmp)
        with long, short:
            request = ChangeRequest(
                "real", "test", {"max_num_seqs": wanted}, {"max_num_seqs": before}, reason="test"
            )
            result = await actuator.apply(instance, request)
            long.stop()
            short.stop()
    assert result.state == DONE, result.outcome
    assert steps_of(journal, result.entry_id) == [*FORWARD, "verifying", DONE]
    assert server.spawns() == spawns + 1, "one restart"
    assert knob(server, "max-num-seqs") == wanted
    # The running server says so itself, and the journal recorded that it did.
    assert stated(server)["max_num_seqs"] == wanted
    assert result.entry_id is not None
    entry = journal.entry(result.entry_id)
    assert entry is not None
    assert entry.facts["read_back"]["state"] == "confirmed", entry.facts["read_back"]
    assert entry.facts["read_back"]["stated"] == {"max_num_seqs": wanted}
    # What the drain cost, as the old server counted it: never more than the clients saw.
    outcomes: list[Outcome] = long.outcomes() + short.outcomes()
    refused_seen = sum(1 for outcome in outcomes if outcome.status == 500)
    refused_counted = entry.facts["restart"]["refused_in_drain"]
    assert isinstance(refused_counted, int)
    assert 0 <= refused_counted <= refused_seen, (refused_counted, refused_seen)
    assert all(outcome.ok for outcome in long.outcomes() if outcome.status != 500)
    journal.close()


@pytest.mark.asyncio
async def test_behind_a_gate_no_request_meets_the_draining_server(
    server: RealVllm, short_tmp: Path
) -> None:
    with gate_in_front(short_tmp, server.port) as (haproxy, port):
        # Two cores serving vLLM, its clients and HAProxy: an exchange may take over a second.
        gate = GateSettings(
            enabled=True,
            stats_socket=str(haproxy.stats_socket),
            interval_s=2.0,
            timeout_s=2.0,
            stale_after_s=10.0,
            drain_timeout_s=60.0,
        )
        # vLLM's parser preflight (its own test is in test_a_parser_and_flags) imports torch:
        # under this load on two cores that takes minutes, and this test is about the drain.
        instance = instance_of(server).model_copy(update={"gate": gate, "python": None})
        before = int(knob(server, "max-num-seqs"))
        wanted = 8 if before != 8 else 16
        spawns = server.spawns()
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        # Long requests are inside when the gate drains; short ones keep arriving until the
        # change is over (the parser preflight alone takes longer than 400 of them).
        long = server.load(clients=4, requests_per_client=100, max_tokens=300, port=port)
        short = server.load(clients=2, requests_per_client=100_000, max_tokens=8, port=port)
        async with live_windows(instance) as windows:
            actuator = VllmActuator(journal, windows, SystemClock(), short_tmp, gate_of)
            with long, short, StatusWatch(haproxy) as watch:
                request = ChangeRequest(
                    "real", "test", {"max_num_seqs": wanted}, {"max_num_seqs": before}, reason="t"
                )
                result = await actuator.apply(instance, request)
                long.stop()
                short.stop()
        assert result.state == DONE, result.outcome
        print("phases (s):", result.timings)  # shown with the test output when it fails
        assert server.spawns() == spawns + 1, "one restart"
        assert stated(server)["max_num_seqs"] == wanted
        assert "DRAIN" in watch.seen, (watch.seen, result.outcome)
        # HAProxy's own check (every 200 ms, its timeout as long) sees the server up again;
        # on two loaded cores a /health answer can outlast one check, so wait a bounded while.
        await eventually(
            lambda: haproxy.stat(BACKEND, SERVER)["status"] == "UP",
            "HAProxy's health check to see the restarted server up",
            timeout_s=30.0,
        )
        assert result.entry_id is not None
        entry = journal.entry(result.entry_id)
        assert entry is not None
        # The draining server refused nothing; the clients met the gate's 503 instead of its 500.
        assert entry.facts["restart"]["refused_in_drain"] == 0, entry.facts["restart"]
        outcomes: list[Outcome] = long.outcomes() + short.outcomes()
        assert all(outcome.ok or outcome.status == 503 for outcome in outcomes), [
            outcome for outcome in outcomes if not outcome.ok and outcome.status != 503
        ]
        statuses = Counter(outcome.status for outcome in outcomes)
        assert statuses[503] > 0, (statuses, watch.seen, entry.facts["drain"])
        journal.close()


@pytest.mark.asyncio
async def test_a_config_real_vllm_refuses_at_start_is_reverted_and_serves_again(
    server: RealVllm, short_tmp: Path
) -> None:
    # A stub registry without the cross-knob rule lets max_num_batched_tokens < max_num_seqs
    # past the governor's preflight (and argparse accepts it): vLLM's SchedulerConfig refuses
    # it ~11 s after start, so supervisord reports a spawn error.
    lax = VersionRegistry("0.32 (stub)", V0_32.knobs, V0_32.removed, V0_32.never, ())
    instance = instance_of(server)
    seqs = int(knob(server, "max-num-seqs"))
    tokens = int(knob(server, "max-num-batched-tokens"))
    spawns = server.spawns()
    journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
    async with live_windows(instance) as windows:
        actuator = VllmActuator(
            journal, windows, SystemClock(), short_tmp, registry_of=lambda _version: lax
        )
        request = ChangeRequest(
            "real", "test", {"max_num_batched_tokens": seqs - 1},
            {"max_num_batched_tokens": tokens}, reason="test",
        )  # fmt: skip
        result = await actuator.apply(instance, request)
    assert result.state == REVERTED, result.outcome
    assert result.quarantine
    assert "the restart command failed" in result.outcome
    assert "must be greater than or equal to max_num_seqs" in server.output()
    assert knob(server, "max-num-batched-tokens") == tokens
    assert server.spawns() == spawns + 2, "the refused start, then the last-known-good one"
    server.wait_ready(READY_S)
    assert stated(server)["max_num_batched_tokens"] == tokens
    journal.close()
