"""The tune proof's own pieces: the envelope grid, best-static, prediction errors, the goals."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.proof_tune import (
    FALLBACK_TUNE,
    POOLED,
    envelope_grid,
    goals,
    median_abs_error,
    most_restarts_in_an_hour,
    pack_for,
    pooled_goal,
    powers_of_two_within,
    prediction_errors,
    with_defaults,
    workloads_named,
)
from daemon.app.simulation.clock import EPOCH
from daemon.app.simulation.events import REALISED, RESTART, REVERT, Event, EventLog
from daemon.app.simulation.journals import read_events
from daemon.app.simulation.names import BEST_STATIC, GOVERNOR, LIMITERS, STATIC_DEFAULT
from daemon.app.simulation.reports import build
from daemon.app.simulation.runs import Job, starting_settings, static_name
from daemon.app.simulation.session import Session, jobs_of
from daemon.app.simulation.tallies import PhaseTally, RunTally
from daemon.app.simulation.workloads import Stretch
from daemon.core.settings import Envelope
from daemon.engine.storage.state_db import STATE_FILE
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind, Evidence
from simulator.arrivals import Arrival
from simulator.profiles import load_profile
from simulator.synthetic_workloads import generate, load_workload

ROOT = Path(__file__).resolve().parents[3]


def _tally(controller: str, seed: int, good: int, events: list[Event] | None = None) -> RunTally:
    phase = PhaseTally("whole", 0.0, 100.0, total=100, good=good)
    return RunTally(controller, seed, 100.0, [phase], 0, 0.0, 0, events or [], [], [])


def test_the_grid_is_every_power_of_two_inside_each_envelope_and_its_bounds() -> None:
    assert powers_of_two_within(Envelope(min=48, max=1000, max_step=256)) == (
        48,
        64,
        128,
        256,
        512,
        1000,
    )
    # The built-in simulation config: [32, 1024] sequences, [2048, 16384] tokens.
    seqs, tokens = envelope_grid()
    assert seqs == (32, 64, 128, 256, 512, 1024)
    assert tokens == (2048, 4096, 8192, 16384)
    # A narrower grid still holds the profile's defaults: best-static is never below them.
    assert with_defaults("tiny-llama-cpu", (64, 1024), (4096,)) == ((64, 128, 1024), (2048, 4096))


def test_a_session_runs_its_own_grid_and_best_static_is_its_best_point() -> None:
    template = Job("", "llama-3.1-8b-h100-tp1", None, ROOT / "x.yaml", 1)
    session = Session(
        template, (1, 2), (STATIC_DEFAULT, BEST_STATIC), grid_seqs=(64, 256), grid_tokens=(4096,)
    )
    names = {job.controller for job in jobs_of(session)}
    assert names == {STATIC_DEFAULT, static_name(64, 4096), static_name(256, 4096)}
    # Best in hindsight: the best mean goodput over the seeds, not the best single seed.
    runs = {
        STATIC_DEFAULT: [_tally(STATIC_DEFAULT, s, 50) for s in (1, 2)],
        static_name(64, 4096): [_tally("a", 1, 99), _tally("a", 2, 10)],
        static_name(256, 4096): [_tally("b", 1, 70), _tally("b", 2, 70)],
    }
    whole = (Stretch("whole", 0.0, 100.0),)
    report = build(
        runs,
        profile="p",
        workload="w",
        seeds=(1, 2),
        phases=whole,
        bursts=(),
        wanted=(STATIC_DEFAULT, BEST_STATIC),
    )
    assert report["controllers"][BEST_STATIC]["grid_point"] == static_name(256, 4096)


def test_the_tuners_errors_come_from_its_realised_decisions_in_the_decision_log(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / STATE_FILE)
    offset = EPOCH.timestamp()

    def realised(at: float, predicted: float, measured: float, error: float) -> Decision:
        details: dict[str, Any] = {
            "predicted": {"now": {}, "after": {"goodput_rps": predicted}},
            "realised": {"goodput_rps": measured},
            "goodput_error": error,
            "comparable": True,
            "text": "tpot-prefill on main: ...",
        }
        return Decision(
            "tpot-prefill", "main", at, DecisionKind.REALISED, Evidence("", {}), details=details
        )

    fired = Decision("tpot-prefill", "main", 10.0, DecisionKind.FIRED, Evidence("", {}))
    store.record([fired, realised(900.0, 8.0, 7.2, -0.1), realised(2000.0, 5.0, 6.0, 0.2)], offset)
    store.close()
    events = read_events(tmp_path, "main", EventLog()).events
    found = [e for e in events if e.kind == REALISED]
    assert [e.at for e in found] == pytest.approx([900.0, 2000.0])
    assert found[0].figures["predicted_goodput_rps"] == 8.0
    assert found[0].figures["realised_goodput_rps"] == 7.2
    runs = [_tally(GOVERNOR, 1, 90, events), _tally(GOVERNOR, 2, 90, [])]
    assert prediction_errors(runs) == [-0.1, 0.2]
    assert median_abs_error([-0.1, 0.2, -0.3]) == pytest.approx(0.2)
    assert median_abs_error([]) is None


def _report(governor: float, best: float, error: float | None, restarts: int) -> dict[str, Any]:
    entry = {"goodput_rps": 10.0, "restarts": 0.0}
    controllers = {name: dict(entry) for name in (STATIC_DEFAULT, *LIMITERS)}
    controllers[BEST_STATIC] = {"goodput_rps": best, "restarts": 0.0}
    controllers[GOVERNOR] = {"goodput_rps": governor, "restarts": float(restarts)}
    return {
        "controllers": controllers,
        "median_prediction_error": error,
        "governor_restarts_in_an_hour": restarts,
    }


def test_the_goals_say_pass_or_miss_against_the_shifting_or_the_steady_bar() -> None:
    shifting = goals(_report(11.0, 10.0, 0.05, 1), shifts=True)
    lines = [goal.line() for goal in shifting]
    assert lines[0].startswith("MISS  goodput vs best-static (goal >= 1.15x): 1.1")
    assert all(line.startswith("pass") for line in lines[1:])  # 1 restart in an hour passes
    steady = goals(_report(9.8, 10.0, None, 2), shifts=False)
    met = {goal.name: goal.met for goal in steady}
    assert met["goodput vs best-static"]  # 0.98 >= 0.97
    assert not met["goodput vs static-default"]
    assert not met["median goodput prediction error"]  # nothing measured is not a pass
    assert not met["restarts per instance in any hour"]


def test_the_prediction_error_goal_pools_every_rows_realised_effects() -> None:
    reports: dict[str, dict[str, Any]] = {
        "a on p": {"prediction_errors": [0.01, -0.3]},
        "b on p": {"prediction_errors": []},
        "c on q": {"prediction_errors": [0.2]},
        POOLED: {"value": 9.0},
    }
    pooled = pooled_goal(reports)
    assert pooled.value == pytest.approx(0.2)
    assert pooled.line().startswith("MISS  median goodput prediction error, 3 realised")
    assert pooled_goal({"a on p": {"prediction_errors": [0.01, -0.1]}}).met
    assert not pooled_goal({"a on p": {"prediction_errors": []}}).met  # nothing is no pass


def test_restarts_are_counted_in_the_busiest_hour_of_any_seed_not_per_run_length() -> None:
    def restarts(*times: float) -> list[Event]:
        return [Event(at, RESTART if at % 2 else REVERT, "p") for at in times]

    # One restart in a 100 s run is one in that hour (not 36 an hour); a revert is a restart.
    assert most_restarts_in_an_hour([_tally(GOVERNOR, 1, 90, restarts(51.0))]) == 1
    seeds = [
        _tally(GOVERNOR, 1, 90, restarts(101.0, 3801.0, 7501.0)),  # three hours apart
        _tally(GOVERNOR, 2, 90, restarts(100.0, 3600.0, 3699.0 + 3600.0)),  # 3500 s apart
        _tally(GOVERNOR, 3, 90, []),
    ]
    assert most_restarts_in_an_hour(seeds) == 2
    assert most_restarts_in_an_hour(seeds[:1]) == 1
    assert most_restarts_in_an_hour([]) == 0


def test_a_misconfigured_start_runs_every_controller_but_the_grid_from_it() -> None:
    (started,) = workloads_named("misconfigured-start")
    assert started.spec.name == "tune-steady-chat.yaml"
    assert started.start("llama-3.1-8b-h100-tp1") == (16, 8192)
    assert started.start("tiny-llama-cpu") == (16, 2048)
    template = Job("", "llama-3.1-8b-h100-tp1", None, started.spec, 1, start=(32, 8192))
    session = Session(
        template,
        (1,),
        (STATIC_DEFAULT, BEST_STATIC, GOVERNOR),
        grid_seqs=(256,),
        grid_tokens=(8192,),
    )
    jobs = {job.controller: job for job in jobs_of(session)}
    # static-default is the start kept, not vLLM's defaults (1024 sequences on this profile).
    assert set(jobs) == {STATIC_DEFAULT, static_name(256, 8192), GOVERNOR}
    profile = load_profile(template.profile)
    for name in (STATIC_DEFAULT, GOVERNOR):
        assert starting_settings(jobs[name], profile).max_num_seqs == 32
    # A start that is a grid point runs once, for both.
    on_grid = Session(
        template, (1,), (STATIC_DEFAULT, BEST_STATIC), grid_seqs=(32,), grid_tokens=(8192,)
    )
    assert [job.controller for job in jobs_of(on_grid)] == [static_name(32, 8192)]


def test_the_pack_runs_with_the_runs_profile_named_in_its_tune_policies(tmp_path: Path) -> None:
    directory = pack_for("tiny-llama-cpu", tmp_path)
    tuned = []
    for path in directory.glob("*.yaml"):
        tune = (yaml.safe_load(path.read_text()).get("action") or {}).get("tune")
        if tune is not None:
            tuned.append(tune)
    assert tuned  # the pack's own, or the bench's stand-in while the pack has none
    assert all(tune["profile"] == "tiny-llama-cpu" for tune in tuned)
    assert FALLBACK_TUNE.exists()


def test_each_part_of_the_shifting_day_draws_its_own_lengths_at_its_own_rate() -> None:
    spec = load_workload(ROOT / "simulator" / "workloads" / "tune-shifting-day.yaml")
    arrivals = generate(spec, 1, profile="llama-3.1-8b-h100-tp1")

    def part(start: float) -> list[Arrival]:
        return [a for a in arrivals if start <= a.arrived_at < start + 900]

    night, day, evening = part(0), part(900), part(1800)
    assert statistics.median(a.output_tokens for a in night) == pytest.approx(500, rel=0.1)
    assert statistics.median(a.prompt_tokens for a in day) == pytest.approx(4000, rel=0.1)
    assert statistics.median(a.output_tokens for a in day) == pytest.approx(60, rel=0.15)
    assert statistics.median(a.prompt_tokens for a in evening) == pytest.approx(6000, rel=0.1)
    assert len(day) / 900 == pytest.approx(9.0, rel=0.08)
    # The lengths come from their own streams: the arrival times do not depend on them.
    plain = generate(spec.model_copy(update={"phases": []}), 1, profile="llama-3.1-8b-h100-tp1")
    assert [a.arrived_at for a in plain] == [a.arrived_at for a in arrivals]


def test_a_workload_the_proof_does_not_know_is_an_error_not_an_empty_run() -> None:
    assert [w.name for w in workloads_named("tune-steady-chat, tune-shifting-day")] == [
        "tune-shifting-day",
        "tune-steady-chat",
    ]
    for names in ("tune-budget-shift", "tune-steady-chat,typo", ""):
        with pytest.raises(ValueError, match="unknown workload"):
            workloads_named(names)
