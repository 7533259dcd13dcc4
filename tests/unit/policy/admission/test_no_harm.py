"""No harm at the gate (issue 16): the admission cap is never cut on a server that fails nothing.

A cut makes requests wait at the gate, and past its queue timeout they are refused: requests
the server alone would have served within the SLO. So the SLO band must read what the SLO
judges. The SLO is per request (a request meets TPOT <= 100 ms or not); vLLM's inter-token
latency is per token, and on chat traffic the steps that carry a prefill chunk put its p95 at
the slo-band's 80 ms budget while every request's own TPOT is far inside the SLO. Here the
signals come as the daemon's fast loop gets them: vLLM's histograms in the signal store (as the
vLLM source writes them), over the loop's window, through the views.
"""

from __future__ import annotations

from daemon.policy.admission.from_view import SIGNALS_READ, admission_signals
from daemon.policy.admission.signals import AdmissionSignals
from daemon.policy.admission.slo_band import SloBand
from daemon.policy.views import target_views
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import SignalStore
from daemon.sources.view import ViewContext, signal_rows

NOW = 1000.0
WINDOW_S = SloBand(min_cap=1, max_cap=1).window_s  # the loop reads slo-band over its own
BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0)
# admission-cap's own settings (policies/admission-cap.yaml).
BAND = SloBand(min_cap=4, max_cap=1024, ttft_target_s=1.5, tpot_target_s=0.08)


def _histogram(
    store: SignalStore, name: str, per_second: dict[float, float], at: float, elapsed: float
) -> None:
    """Cumulative buckets of ``name`` at ``at``: ``per_second`` observations at each value."""
    samples = []
    for bound in (*BUCKETS, float("inf")):
        count = sum(rate for value, rate in per_second.items() if value <= bound) * elapsed
        le = "+Inf" if bound == float("inf") else repr(bound)
        key = SeriesKey(f"{name}_bucket", labels_of({"le": le, "instance": "a"}))
        samples.append(Sample(key, count, at, "vllm-a"))
    store.add(samples)


def _chat_server(in_flight: float, queued: float, request_tpot_s: float = 0.03) -> SignalStore:
    """30 s of a chat server inside its SLO, behind a gate that binds nothing, scraped every 2 s.

    20 requests/s, TTFT 0.3 s each; 2,000 tokens/s, 12% of them from steps that carried a
    prefill chunk (90 ms apart) and the rest 20 ms apart; each request's own mean TPOT 30 ms
    unless told otherwise.
    """
    store = SignalStore()
    for t in range(0, 31, 2):
        at, elapsed = NOW - 30 + t, float(100 + t)
        _histogram(store, "vllm_ttft_seconds", {0.3: 20.0}, at, elapsed)
        _histogram(store, "vllm_itl_seconds", {0.02: 1760.0, 0.09: 240.0}, at, elapsed)
        _histogram(store, "vllm_request_tpot_seconds", {request_tpot_s: 20.0}, at, elapsed)
        instance = labels_of({"instance": "a"})
        server = labels_of({"backend": "vllm", "server": "a", "instance": "a"})
        store.add(
            [
                Sample(SeriesKey("vllm_num_preemptions_total", instance), 0.0, at, "vllm-a"),
                Sample(SeriesKey("haproxy_server_maxconn", server), 1024.0, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_sessions_current", server), in_flight, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_queue_current", server), queued, at, "haproxy-a"),
            ]
        )
    return store


def _signals(store: SignalStore) -> AdmissionSignals:
    context = ViewContext(
        now=NOW,
        window_s=WINDOW_S,
        stale_after=lambda _key: 10.0,
        targets=("a",),
        only=SIGNALS_READ,
    )
    return admission_signals(target_views(signal_rows(store, context), ["a"])["a"])


def test_the_gate_is_not_cut_on_a_server_whose_every_request_meets_the_slo() -> None:
    signals = _signals(_chat_server(in_flight=90.0, queued=0.0))

    step = BAND.step(BAND.initial_state(), signals, NOW)

    assert step.cap is None, step.reason
    assert signals.tpot_p95_s is not None
    assert signals.tpot_p95_s <= 0.05  # each request's TPOT, not a token's


def test_it_still_cuts_when_the_requests_themselves_break_the_tpot_budget() -> None:
    store = _chat_server(in_flight=90.0, queued=0.0, request_tpot_s=0.12)

    step = BAND.step(BAND.initial_state(), _signals(store), NOW)

    assert step.cap is not None
    assert step.cap < 90
    assert "tpot_p95" in step.reason
