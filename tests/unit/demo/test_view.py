"""The live panel and the watch's events, drawn from samples (issue 19, finding 9).

The panel is rendered by rich into text as a terminal would show it; the watch runs its real
turn on a sampler that was fed by hand (not started), with no children and auto approvals.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from daemon.app.demo.approver import Approver
from daemon.app.demo.children import Children
from daemon.app.demo.first_tokens import FirstTokens
from daemon.app.demo.sampler import Sample, Sampler
from daemon.app.demo.view import Frame, render_panel
from daemon.app.demo.watch import Watch

ORIGIN = 50_000.0
VALUES: dict[str, float | None] = {"running": 30.0, "waiting": 45.0, "kv_usage": 0.4, "ttft_p95_s": 4.392405063291138,
          "tpot_p95_s": 0.012, "preemptions_per_s": 0.0, "gate_cap": 48.0, "gate_queue": 12.0}  # fmt: skip
PENDING = [{"name": "ttft-queue", "targets": {"main": {
    "phase": "pending", "since": ORIGIN + 35, "fires_at": ORIGIN + 215, "acts": True}}}]  # fmt: skip
PROPOSAL = {"id": "p1", "policy": "ttft-queue", "target": "main", "state": "pending",
            "changes": {"max_num_batched_tokens": {"old": 256.0, "new": 320.0}},
            "why": "ttft_p95_s > 2.0 held for 3 min [queue_p95_s=4.392]",
            "cost": "restarts vLLM: ~13 s of lost capacity"}  # fmt: skip


def text_of(frame: Frame, events: list[str] | None = None) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(render_panel(frame, events or []))
    return console.export_text()


def test_the_panel_says_what_the_governor_waits_for_and_when_it_will_act() -> None:
    sample = Sample(85.0, "ready", VALUES, 256, FirstTokens("a", 800, 480))
    frame = Frame(
        t=85.0, total_s=420.0, sample=sample, arrivals_per_s=13.0,
        waiting=["ttft-queue on main: its condition has held since 0:35; it will act at 3:35 "
                 "(in 2 min 10 s) if it keeps holding"],
        slo=["with max-num-batched-tokens 256 (since 0:00): 60% of 800 first tokens within 2 s"],
    )  # fmt: skip
    text = text_of(frame)
    assert "the governor is waiting for:" in text
    assert "it will act at 3:35 (in 2 min 10 s)" in text
    assert "SLO attainment:" in text
    assert "TTFT p95          4.4 s (SLO 2 s)" in text
    assert "pending proposals: none" not in text
    # The gate in front: its cap and its queue, '-' when the daemon has no fresh reading.
    assert "gate cap / queued 48 / 12" in text
    assert "gate cap 48 (12 queued there)" in frame.status_line()
    stale_sample = Sample(85.0, "ready", {**VALUES, "gate_cap": None}, 256)
    stale = Frame(t=85.0, total_s=420.0, sample=stale_sample, arrivals_per_s=13.0)
    assert "gate cap / queued - / 12" in text_of(stale)


def test_a_question_shows_in_the_panel_with_the_change_and_its_cost() -> None:
    frame = Frame(t=216.0, total_s=420.0, sample=None, arrivals_per_s=13.0, asking=PROPOSAL)
    text = text_of(frame)
    assert "the governor proposes: ttft-queue on main: max_num_batched_tokens 256 -> 320" in text
    assert "cost: restarts vLLM: ~13 s of lost capacity" in text
    assert "press y (yes) or n (no)" in text
    assert "no reading yet" not in text
    assert "down (restarting)" not in text


class Recording:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.frames: list[Frame] = []

    def show(self, frame: Frame) -> None:
        self.frames.append(frame)

    def event(self, t: float, text: str) -> None:
        self.events.append(text)


def watch_on(tmp_path: Path, view: Recording) -> tuple[Watch, Sampler]:
    sampler = Sampler(tmp_path / "none.sock", "http://127.0.0.1:9", tmp_path / "v.yaml", ORIGIN)
    watch = Watch(
        duration_s=420.0, approve="auto", origin=ORIGIN, arrival_times=[], sampler=sampler,
        approver=Approver(tmp_path / "none.sock", "auto"), view=view, children=Children(),
    )  # fmt: skip
    return watch, sampler


def feed(sampler: Sampler, sample: Sample, **observed: Any) -> None:
    with sampler.observed.lock:
        sampler.observed.samples.append(sample)
        for key, value in observed.items():
            setattr(sampler.observed, key, value)


def test_no_reading_yet_is_not_a_server_down(tmp_path: Path) -> None:
    view = Recording()
    watch, sampler = watch_on(tmp_path, view)
    watch.tick(-8.0)  # the sampler has not looked yet
    assert view.events == []
    assert view.frames[-1].status_line() == "[0:00/7:00] no reading yet"
    feed(sampler, Sample(-7.5, "ready", VALUES, 256))
    watch.tick(-7.5)
    assert view.events == []  # serving with the starting value: nothing happened


def test_a_pending_policy_is_told_once_and_kept_on_the_panel(tmp_path: Path) -> None:
    view = Recording()
    watch, sampler = watch_on(tmp_path, view)
    feed(sampler, Sample(85.0, "ready", VALUES, 256), policies=PENDING)
    watch.tick(85.0)
    watch.tick(86.0)
    told = [e for e in view.events if "will act at 3:35" in e]
    assert len(told) == 1
    assert "will act at 3:35 (in 2 min 10 s)" in view.frames[0].waiting[0]
    assert "in 2 min 9 s" in view.frames[1].waiting[0]  # the count goes down each turn


def test_a_restart_and_its_measured_cost_are_told(tmp_path: Path) -> None:
    view = Recording()
    watch, sampler = watch_on(tmp_path, view)
    feed(sampler, Sample(230.0, "ready", VALUES, None), actuations=[
        {"id": 1, "policy": "ttft-queue", "state": "open", "step": "restarting"}])  # fmt: skip
    watch.tick(230.0)
    done = {"id": 1, "policy": "ttft-queue", "state": "done", "outcome": "applied and verified",
            "timings": {"restart": 10.6, "ready": 3.1}}  # fmt: skip
    feed(sampler, Sample(275.0, "ready", VALUES, 320), actuations=[done])
    watch.tick(275.0)
    assert view.events == [
        "change #1 by ttft-queue: restarting the server: it finishes what it holds and refuses "
        "new requests",
        "the server is down (restarting): arrivals now are missed",
        "change #1 by ttft-queue: done: applied and verified",
        "the restart took 14 s without taking new requests (draining and stopping 11 s, "
        "loading 3 s)",
        "the server serves again, with max-num-batched-tokens 320",
    ]
    assert view.frames[-1].costs == [
        "change #1: the restart took 14 s without taking new requests (draining and stopping "
        "11 s, loading 3 s)"
    ]
