"""What people use today, each as a controller stepped every second of virtual time.

- ``static``: vLLM's settings, never changed (the default, or one point of a grid).
- ``naive-script``: the seed's cron script. Every 15 s it reads free GPU memory as
  ``nvidia-smi`` shows it; above 8000 MiB it sets ``--max-num-seqs 256``, below 3000 MiB 64,
  and it restarts vLLM whenever that changes the value. It reads what :func:`free_gpu_memory_mib`
  computes: vLLM pre-allocates its KV cache up to ``gpu-memory-utilization`` at start, so
  while it serves the free memory is flat, whatever the load (``gpu_memory_utilization`` of
  vLLM's ``CacheConfig``, vllm/config/cache.py: the share of GPU memory taken at start):

      free = total - gpu_memory_utilization x total
           = 81,559 MiB - 0.90 x 81,559 MiB = 8,156 MiB   (an H100 80 GB, per GPU)

  and while vLLM restarts its memory is released (free = total). Both are above 8000 MiB, so
  the script's first look sets 256 (from the default 1024, one restart) and it never moves
  again: its rule reads a number that says nothing of the load.
- limiters (``gradient2``, ``aimd``, ``vegas``): the off-the-shelf concurrency limiters on the
  gate's cap (a :class:`CapLoop`, always on), vLLM at its defaults behind the gate.
"""

from __future__ import annotations

import dataclasses

from daemon.app.simulation.admission import CapLoop
from daemon.app.simulation.events import RESTART, EventLog
from daemon.app.simulation.observe import Observer
from simulator.engine import Phase
from simulator.virtual_time import VirtualRun

# nvidia-smi's total for an H100 80 GB (HBM3); the simulated profiles are H100s.
H100_TOTAL_MIB = 81_559
GPU_MEMORY_UTILIZATION = 0.90  # vLLM's default
NAIVE_PERIOD_S = 15.0
NAIVE_HIGH_MIB, NAIVE_HIGH_SEQS = 8000.0, 256
NAIVE_LOW_MIB, NAIVE_LOW_SEQS = 3000.0, 64
LIMITER_INTERVAL_S = 2.0
LIMITER_MIN_CAP = 4


def free_gpu_memory_mib(
    serving: bool,
    *,
    total_mib: float = H100_TOTAL_MIB,
    utilization: float = GPU_MEMORY_UTILIZATION,
) -> float:
    """Free memory of one GPU as ``nvidia-smi`` shows it (see the module docstring)."""
    return total_mib - utilization * total_mib if serving else total_mib


def naive_rule(free_mib: float) -> int | None:
    """The script's rule: the max-num-seqs it wants for ``free_mib``, or None (no opinion)."""
    if free_mib > NAIVE_HIGH_MIB:
        return NAIVE_HIGH_SEQS
    if free_mib < NAIVE_LOW_MIB:
        return NAIVE_LOW_SEQS
    return None


class Static:
    """vLLM's settings, never changed."""

    def __init__(self, run: VirtualRun) -> None:
        self.run = run
        self.log = EventLog()

    def step(self, now: float) -> None:
        """Nothing, ever."""


class NaiveScript:
    """The free-memory cron script (see the module docstring).

    Args:
        run: The run whose engine it restarts.
        utilization: vLLM's ``gpu-memory-utilization``.
    """

    def __init__(self, run: VirtualRun, utilization: float = GPU_MEMORY_UTILIZATION) -> None:
        self.run = run
        self.utilization = utilization
        self.log = EventLog()
        self._next_at = NAIVE_PERIOD_S

    def step(self, now: float) -> None:
        """Every 15 s: read free memory, apply the rule, restart on a change."""
        if now < self._next_at:
            return
        self._next_at += NAIVE_PERIOD_S
        serving = self.run.engine.phase is Phase.SERVING
        wanted = naive_rule(free_gpu_memory_mib(serving, utilization=self.utilization))
        settings = self.run.snapshot().settings
        if wanted is None or wanted == settings.max_num_seqs or not serving:
            return
        self.run.restart(dataclasses.replace(settings, max_num_seqs=wanted))
        changes = {"max_num_seqs": (float(settings.max_num_seqs), float(wanted))}
        self.log.add(now, RESTART, "naive-script", changes, "free GPU memory rule")


class Limiter:
    """An off-the-shelf limiter on the gate's cap, always on.

    Args:
        run: The run (with a gate).
        kind: ``gradient2``, ``aimd`` or ``vegas``.
        target: The instance's name in views.
    """

    def __init__(self, run: VirtualRun, kind: str, target: str = "main") -> None:
        self.run = run
        self.log = EventLog()
        self.observer = Observer(run, target)
        self.loop = CapLoop(
            run, self.log, kind, kind, min_cap=LIMITER_MIN_CAP, interval_s=LIMITER_INTERVAL_S
        )

    def step(self, now: float) -> None:
        """Scrape, then step the limiter when its interval has passed."""
        self.observer.scrape(now)
        settings = self.run.snapshot().settings
        knobs = {"max_num_seqs": float(settings.max_num_seqs)}
        self.loop.step(now, self.observer.view(now, knobs))
