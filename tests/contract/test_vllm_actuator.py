"""The vLLM actuator against a real service manager (supervisord) and a real ``sim serve``.

The journal is the engine's SQLite journal; the signal windows are the engine's, over a signal
plane scraping the sim (or scripted, where a test needs a given verdict).
"""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actuators.vllm.actuator import VllmActuator
from actuators.vllm.plan import render_plan
from actuators.vllm.registry import V0_33, VersionRegistry
from daemon.api import (
    DONE,
    DRY_RUN,
    REFUSED,
    REVERTED,
    ChangeRequest,
    Envelope,
    SystemClock,
    VllmInstance,
)
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.asyncio, pytest.mark.slow]

FORWARD = ["planned", "written", "drained", "restarting", "restarted", "ready", "verifying"]


def instance_of(sim: SupervisedSim, **overrides: Any) -> VllmInstance:
    settings: dict[str, Any] = {
        "name": "sim",
        "url": sim.url,
        "scrape_interval_s": 0.5,
        "config_path": sim.vllm_yaml,
        "env_file": sim.env_file,
        "restart_command": sim.restart_command(),
        "restart_timeout_s": 30.0,
        "ready_timeout_s": 20.0,
        "verify_window_s": 1.5,
        "knobs": {
            "max_num_seqs": Envelope(
                min=1, max=4096, max_step=4096, min_dwell_s=0, hourly_budget=20
            ),
            "log_level": Envelope(min=10, max=40, max_step=30, min_dwell_s=0, hourly_budget=20),
        },
        **overrides,
    }
    return VllmInstance(**settings)


# What the signal store says of a server without errors or preemptions: covered, all quiet.
QUIET = {"errors_per_s": 0.0, "preemptions_per_s": 0.0}


class ScriptedWindows:
    """Signal windows that answer ``before`` until the change is journaled, ``after`` then."""

    def __init__(self, before: Mapping[str, float | None], after: Mapping[str, float | None]):
        self.answers = [before]
        self.after = after

    def measure(self, target: str, window_s: float) -> Mapping[str, float | None]:
        return self.answers.pop(0) if self.answers else self.after


# A tuned change's counterfactual, as a tune policy's request carries it to the journal.
FORECAST = {"objective": "goodput", "after": {"slo_attainment": 0.96, "goodput_rps": 7.7}}


def request(
    changes: dict[str, float],
    current: dict[str, float],
    forecast: Mapping[str, Any] | None = None,
) -> ChangeRequest:
    return ChangeRequest(
        "sim", "test-policy", changes, current, reason="a test asks", forecast=forecast
    )


def steps_of(journal: SqliteJournal, entry_id: int | None) -> list[str]:
    assert entry_id is not None
    return [step for _, step in journal.steps(entry_id)]


async def test_retunes_max_num_seqs_once_under_concurrent_decisions_without_a_shell(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[tuple[str, ...]] = []
    exec_for_real = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
        launched.append(argv)
        return await exec_for_real(*argv, **kwargs)

    async def no_shell(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a shell was used")

    monkeypatch.setattr("asyncio.create_subprocess_exec", recording_exec)
    monkeypatch.setattr("asyncio.create_subprocess_shell", no_shell)
    with supervised_sim(short_tmp, "max-num-seqs: 8  # tuned by the governor\n") as sim:
        instance = instance_of(sim)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        async with live_windows(instance) as windows:
            first = VllmActuator(journal, windows, SystemClock(), short_tmp)
            # A second actuator with its own lock, as a second governor process would have.
            second = VllmActuator(journal, windows, SystemClock(), short_tmp)
            assert first.current_knobs(instance)["max_num_seqs"] == 8
            # Dry-run mode and a freeze both stop a change before anything is touched.
            dry = instance.model_copy(update={"mode": "dry-run"})
            planned = await first.apply(dry, request({"max_num_seqs": 16}, {"max_num_seqs": 8}))
            assert planned.state == DRY_RUN, planned.outcome
            assert "-max-num-seqs: 8" in render_plan(planned.plan)
            (short_tmp / "freeze.sim").write_text("incident 4711\n")
            frozen = await first.apply(instance, request({"max_num_seqs": 16}, {"max_num_seqs": 8}))
            assert frozen.state == REFUSED
            assert "incident 4711" in frozen.outcome
            (short_tmp / "freeze.sim").unlink()
            assert sim.vllm_yaml.read_text().endswith("max-num-seqs: 8  # tuned by the governor\n")
            assert sim.spawns() == 1
            results = await asyncio.gather(
                first.apply(
                    instance,
                    request({"max_num_seqs": 16, "log_level": 30}, {"max_num_seqs": 8}, FORECAST),
                ),
                first.apply(instance, request({"max_num_seqs": 4}, {"max_num_seqs": 8}, FORECAST)),
                second.apply(
                    instance, request({"max_num_seqs": 32}, {"max_num_seqs": 8}, FORECAST)
                ),
            )
        [done] = [result for result in results if result.state == DONE]
        refused = [result for result in results if result.state == REFUSED]
        assert len(refused) == 2, [result.outcome for result in results]
        assert sim.spawns() == 2, "one restart, not two or three"
        assert launched == [tuple(sim.restart_command())]
        wanted = int(done.changes["max_num_seqs"])
        assert first.current_knobs(instance)["max_num_seqs"] == wanted
        assert steps_of(journal, done.entry_id) == [*FORWARD, "verifying", DONE]
        text = sim.vllm_yaml.read_text()
        # One line changed; the operator's comment and the file's mode stay.
        assert (
            text
            == f"served-model-name: sim/test-model\nmax-num-seqs: {wanted}  # tuned by the governor\n"
        )
        assert stat.S_IMODE(sim.vllm_yaml.stat().st_mode) == 0o640
        if "log_level" in done.changes:
            assert "VLLM_LOGGING_LEVEL=WARNING\n" in sim.env_file.read_text()
        # The restarted server serves, with the new value (it logs its settings at start).
        assert f"max-num-seqs {wanted}," in sim.sim_log()
        models = sim.get("/v1/models")
        assert models is not None
        assert models[0] == 200
        assert [model["id"] for model in json.loads(models[1])["data"]] == ["sim/test-model"]
        metrics = sim.get("/metrics")
        assert metrics is not None
        assert "vllm:num_requests_running" in metrics[1]
        assert done.entry_id is not None
        entry = journal.entry(done.entry_id)
        assert entry is not None
        assert {"plan", "preflight", "write", "restart", "ready", "verify"} <= set(entry.timings)
        assert entry.forecast == FORECAST  # the audit log says what it was predicted to buy
        journal.close()


async def test_a_server_that_fails_to_start_is_reverted_and_serves_again(short_tmp: Path) -> None:
    # A stub registry without the cross-knob rule lets max_num_seqs > max_num_batched_tokens
    # through preflight; the sim, like vLLM, refuses to start with it.
    lax = VersionRegistry("0.33 (stub)", V0_33.knobs, V0_33.removed, V0_33.never, ())
    with supervised_sim(short_tmp, "max-num-seqs: 8\nmax-num-batched-tokens: 64\n") as sim:
        instance = instance_of(sim)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        windows = ScriptedWindows(QUIET, QUIET)
        actuator = VllmActuator(
            journal, windows, SystemClock(), short_tmp, registry_of=lambda _version: lax
        )
        result = await actuator.apply(instance, request({"max_num_seqs": 128}, {"max_num_seqs": 8}))
        assert result.state == REVERTED, result.outcome
        assert result.quarantine
        # supervisord reports the failed start when the sim dies within startsecs (3 s); on a
        # loaded machine its interpreter can take longer to refuse the flags, the restart then
        # "succeeds" and the server is simply never ready. Either way the new config failed.
        assert "restart command failed" in result.outcome or "not ready" in result.outcome, (
            result.outcome
        )
        steps = steps_of(journal, result.entry_id)
        assert steps[:5] == FORWARD[:5]
        assert steps[5:] == [
            "reverting", "revert_written", "revert_restarting", "revert_restarted",
            "revert_ready", "revert_verifying", "revert_verifying", REVERTED,
        ]  # fmt: skip
        assert "max-num-seqs: 8\n" in sim.vllm_yaml.read_text()
        sim.wait_ready(5)
        assert sim.ctl("status", "sim").stdout.split()[1] == "RUNNING"
        journal.close()
