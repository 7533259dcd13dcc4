"""Issue 18's day with the governor's batch window: the daemon itself, on a diurnal day.

The day (:mod:`simulator.diurnal_workloads`: a real trace's online traffic over 24 compressed
hours, and a batch backlog) runs through the simulated engine under ``--scheduling-policy
priority``, governed by the daemon's own :class:`~daemon.engine.governor.Governor`
(:func:`daemon.app.simulation.governed.govern`) with the given batch-window policies and
nothing else. Nothing of the window is computed here:

- **the backlog** reaches the governor as batch job files (OpenAI batch input format) dropped
  into its inbox (``[batch] inbox_target``), in the backlog's order, ``chunk_lines`` per file,
  each dropped while the one before still has at least half of its lines to go (a backlog
  that is always there, as a day's queue of offline jobs);
- **the window** is the policies' (``batch:`` action): the lane steerer opens, widens,
  narrows and closes the lane from the online signals (the governor takes its own requests
  out of them, :mod:`daemon.engine.batches.online_views`);
- **the requests** are the job runner's, sent through the batch lane's HTTP port to the
  engine in-process (:class:`~daemon.app.simulation.engine_exchange.EngineExchange`), at the
  lane's priority; a request the lane cuts off is aborted in the engine.

The run's records hold both lanes (each with its priority), as the fixed windows' runs do
(:mod:`simulator.batch_windows`), so the same report reads all three.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from daemon.app.simulation.config import BUILT_IN
from daemon.app.simulation.engine_exchange import EngineExchange
from daemon.app.simulation.governed import Governing, govern
from daemon.app.simulation.sandbox import Sandbox
from daemon.core.batch_settings import BatchSection
from daemon.core.settings import GovernorConfig
from simulator.arrivals import Arrival
from simulator.diurnal_workloads import DiurnalSpec, iter_batch_jobs, online_arrivals
from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.virtual_time import VirtualRun


@dataclass(frozen=True, slots=True)
class DayPlan:
    """How the governed day runs.

    Attributes:
        policy_dirs: The governor's policies (a batch window, e.g. ``examples/policies``).
        lane_limit: ``[batch] concurrency``: the widest the lane may be.
        chunk_lines: Lines per job file dropped into the inbox.
        tick_s: How often the engine is brought up to the clock when nobody looks (a
            finished batch request reaches the lane within this).
        sample_interval_s: The engine's sampling grid (busy share).
        lane_sample_s: How often the batch requests in flight are sampled.
        piece_tokens: ``[batch] prefill_piece_tokens`` (0: every prompt whole).
    """

    policy_dirs: tuple[Path, ...]
    lane_limit: int = 64
    chunk_lines: int = 5000
    tick_s: float = 0.2
    sample_interval_s: float = 60.0
    lane_sample_s: float = 10.0
    piece_tokens: int = 0


@dataclass(slots=True)
class GovernedDay:
    """What a governed day did.

    Attributes:
        run: The run: both lanes' records and the engine's samples.
        lane: ``(t, batch requests in flight)`` every ``lane_sample_s``.
        priorities: Batch requests the engine received, by priority.
        sent: Batch requests the engine received (a resend counts again).
        job_files: Job files dropped into the inbox.
        pieces: The engine's ids of the lane's prefill pieces (no line's tokens).
    """

    run: VirtualRun
    lane: list[tuple[float, int]] = field(default_factory=list)
    priorities: dict[int, int] = field(default_factory=dict)
    sent: int = 0
    job_files: int = 0
    pieces: set[str] = field(default_factory=set)


class _Backlog:
    """Drops the backlog into the inbox a file at a time, and samples the lane."""

    def __init__(self, jobs: Iterator[Arrival], plan: DayPlan, model: str, day: GovernedDay):
        self._jobs = jobs
        self._left = True
        self._plan = plan
        self._model = model
        self._day = day
        self._next_sample = 0.0

    def __call__(self, sandbox: Sandbox, exchange: EngineExchange) -> None:
        day, plan = self._day, self._plan
        day.sent = exchange.sent
        day.priorities = dict(exchange.priorities)
        day.pieces = exchange.pieces
        now = day.run.now
        if now >= self._next_sample:
            day.lane.append((round(now, 3), exchange.in_flight))
            self._next_sample = now + plan.lane_sample_s
        dropped = day.job_files * plan.chunk_lines
        if self._left and dropped - exchange.sent < plan.chunk_lines // 2:
            self._left = self._drop(sandbox.batch_inbox, day.job_files)
            if self._left:
                day.job_files += 1

    def _drop(self, inbox: Path, index: int) -> bool:
        """Drop job file ``index``; False when the backlog is used up."""
        start = index * self._plan.chunk_lines
        lines = []
        chunk = islice(self._jobs, self._plan.chunk_lines)
        for number, job in enumerate(chunk, start):
            body = {
                "model": self._model,
                # The simulated model counts one token per id (no tokenizer). The first id is
                # the line's own, so no two prompts share a block in the prefix cache.
                "prompt": [number + 2] + [1] * (job.prompt_tokens - 1),
                "max_tokens": job.output_tokens,
            }
            request = {"custom_id": f"day-{number}", "method": "POST", "url": "/v1/completions"}
            lines.append(json.dumps({**request, "body": body}, separators=(",", ":")))
        # Written aside and renamed in, as an inbox wants it: never seen half-written.
        written = inbox.parent / f"backlog-{index:04d}.jsonl"
        if not lines:
            return False
        written.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.rename(inbox / written.name)
        return True


def day_config(plan: DayPlan, base: GovernorConfig = BUILT_IN) -> GovernorConfig:
    """``base`` with the batch inbox feeding its first instance and the plan's policies."""
    batch = BatchSection(
        concurrency=plan.lane_limit,
        inbox_target=base.vllm[0].name,
        max_lines=plan.chunk_lines,
        max_file_bytes=1 << 32,
        prefill_piece_tokens=plan.piece_tokens,
    )
    governor = base.governor.model_copy(update={"policy_dirs": plan.policy_dirs})
    return base.model_copy(update={"batch": batch, "governor": governor})


def govern_day(spec: DiurnalSpec, profile_name: str, plan: DayPlan) -> GovernedDay:
    """Run ``spec``'s day on ``profile_name`` governed by the plan's policies."""
    profile = load_profile(profile_name)
    settings = EngineSettings.defaults(profile, scheduling_policy=SchedulingPolicy.PRIORITY)
    run = VirtualRun(
        Engine(profile, settings),
        online_arrivals(spec, profile=profile_name),
        sample_interval_s=plan.sample_interval_s,
    )
    day = GovernedDay(run)
    backlog = _Backlog(iter_batch_jobs(spec), plan, settings.served_model_name, day)
    how = Governing(
        duration_s=spec.duration_s,
        gated=False,
        approval_delay_s=60.0,
        approve=True,
        tick_s=plan.tick_s,
        on_tick=backlog,
    )
    with tempfile.TemporaryDirectory(prefix="vg-day-", dir="/tmp") as scratch:
        govern(run, Path(scratch), day_config(plan), how)
    return day
