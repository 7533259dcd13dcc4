"""Behind an admission gate, the what-if plans on the demand, not on what the gate admitted.

Issue 16, the tune proof: the tuner made no proposal, because vLLM's own counters behind a gate
show only what the gate let in, at which the setting in force is fine. Here a server started
with ``max_num_seqs`` 16 sits behind a gate (HAProxy's 1.5 s queue timeout) that refuses about
half of 12 requests/s: the characterised rate must be the 12, split into admitted, refused
and queued, and a what-if must see that more sequences serve them.
"""

from __future__ import annotations

from daemon.app.commands.whatif_table import report_lines
from daemon.core.settings import VllmInstance
from daemon.sources.store import SignalStore
from daemon.whatif.candidates import Setting
from daemon.whatif.characterisation import characterise
from daemon.whatif.requests import Question
from daemon.whatif.rounds import Round, run_round
from daemon.whatif.series_snapshot import snapshot
from simulator.arrivals import Arrival
from simulator.gate import Gate
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from tests.unit.whatif.scraped_runs import INSTANCE, scraped_store

DURATION_S = 180.0
RATE_RPS = 12.0
IN_FORCE = {"max_num_seqs": 16, "max_num_batched_tokens": 2048}


def _gated_store(cap: int) -> tuple[SignalStore, Gate[Arrival], int]:
    """A server at 16 x 2048 behind a gate at ``cap``, scraped; its gate; the arrivals."""
    spec = WorkloadSpec(
        name="chat",
        duration_s=DURATION_S,
        seed=3,
        arrivals=GammaArrivals(rate_rps=RATE_RPS, cv=1.0),
        prompt_tokens=LogNormalLengths(median=1000, p90=2500, max=16_000),
        output_tokens=LogNormalLengths(median=300, p90=700, max=4000),
    )
    arrivals = generate(spec)
    profile = load_profile("llama-3.1-8b-h100-tp1")
    gate = Gate[Arrival](cap, 1.5)
    settings = EngineSettings.defaults(profile, **IN_FORCE)
    store = scraped_store(profile, settings, arrivals, DURATION_S, gate=gate)
    return store, gate, len(arrivals)


def _instance(gated: bool) -> VllmInstance:
    return VllmInstance.model_validate(
        {
            "name": INSTANCE,
            "url": "http://127.0.0.1:9",
            "gate": {"enabled": gated},
            "knobs": {"max_num_seqs": {"min": 16, "max": 64, "max_step": 48}},
        }
    )


def _round(store: SignalStore, *, gated: bool = True) -> Round:
    return Round(
        instance=_instance(gated),
        series=snapshot(store, INSTANCE, 0.0),
        now=DURATION_S,
        window_s=DURATION_S,
        in_force=dict(IN_FORCE),
        question=Question(simulated_s=120.0),
    )


def _near(value: float, truth: float, share: float) -> bool:
    return abs(value - truth) <= share * truth


def test_the_rate_behind_a_gate_is_what_came_to_the_gate_not_what_it_let_in() -> None:
    store, gate, arrived = _gated_store(cap=16)
    assert gate.timed_out > 0.4 * arrived  # the premise: the gate refuses a large share

    summary = characterise(store, INSTANCE, DURATION_S, DURATION_S)

    assert _near(summary.rate_rps, arrived / DURATION_S, 0.05)
    demand = summary.gate
    assert demand is not None
    assert demand.cap == 16
    assert _near(demand.refused_rps * summary.window_s, gate.timed_out, 0.05)
    assert demand.admitted_rps < 0.6 * summary.rate_rps
    parts = demand.admitted_rps + demand.refused_rps + demand.queued_rps
    assert _near(parts, summary.rate_rps, 0.01)
    assert summary.to_json()["demand"]["gate_cap"] == 16


def test_the_gates_refusals_make_more_sequences_win_the_what_if() -> None:
    store, _, _ = _gated_store(cap=16)

    report = run_round(_round(store))

    # Now: the gate at 16 refuses about half, as it did; 64 sequences behind a gate open to 64
    # serve nearly all of it, worth a restart.
    assert report.pick == Setting(64, 2048), report.reason
    assert report.current.slo_attainment < 0.6
    assert report.current.gate_cap == 16
    best = report.ranked[0]
    assert best.gate_cap == 64
    assert best.slo_attainment > 0.9
    shown = report.to_json()
    assert shown["gate"] == {"cap": 16, "queue_timeout_s": 1.5}
    assert shown["workload"]["demand"]["refused_rps"] > 5.0
    assert any(line.startswith("  at the gate: ") for line in report_lines(shown))
    # The replay of "now" refuses the share the gate refused: no warning that it does not fit.
    assert not any("trust these predictions less" in note for note in report.notes)


def test_a_restart_must_beat_what_opening_the_gate_alone_would_do() -> None:
    # A gate cut to 8 in front of the same server: the refusals are the gate's doing, and
    # the gate open to 16 serves more without a restart; the what-if says so and a candidate
    # is judged against that, not against the cut gate.
    store, _, _ = _gated_store(cap=8)

    report = run_round(_round(store))

    assert report.current.gate_cap == 8
    assert report.gate_open is not None
    assert report.gate_open.gate_cap == 16
    assert report.gate_open.goodput_rps > report.current.goodput_rps
    assert any("gate open to 16" in note for note in report.notes)


def test_without_the_gates_counters_the_round_says_it_plans_on_what_vllm_admitted() -> None:
    store, _, _ = _gated_store(cap=16)
    for name in ("haproxy_backend_http_5xx_total", "haproxy_queue_current"):
        for key in store.keys(name):
            store.forget(key)

    report = run_round(_round(store))

    assert report.request.summary.gate is None
    assert report.request.gate is None
    assert any("gate's counters are missing" in note for note in report.notes)
