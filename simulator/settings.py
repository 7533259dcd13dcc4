"""The settings one incarnation of the simulated engine runs with, resolved and checked.

They come from vLLM's own ``--config`` YAML (:mod:`simulator.vllm_config`) or, for a
controller in the loop, from ``dataclasses.replace`` on the settings in force; either way
``__post_init__`` applies vLLM 0.33's own consistency checks (``SchedulerConfig``), so an
engine never starts with settings real vLLM would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from simulator.errors import SimulatorError
from simulator.profiles import EngineProfile


class SchedulingPolicy(StrEnum):
    """vLLM's ``--scheduling-policy`` (:mod:`simulator.request_queues` says what each does)."""

    FCFS = "fcfs"
    PRIORITY = "priority"


class SettingsError(SimulatorError):
    """Engine settings that vLLM would refuse; ``problems`` holds (key, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{key}: {message}" for key, message in self.problems))


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What the scheduler and the lifecycle honour. Names follow vLLM's options.

    Attributes:
        max_num_seqs: Most sequences in one step (sizes CUDA-graph capture).
        max_num_batched_tokens: Token budget of one step.
        max_num_active_seqs: Admission cap on RUNNING requests, or None for max_num_seqs.
        prefill_schedule_interval: Admit prefill only every N executed steps.
        long_prefill_token_threshold: Cap on one prefill's chunk (0: no cap).
        long_prefill_token_threshold_adaptive: Floor that cap at a fair share of the budget.
        watermark: Fraction of KV blocks kept free when admitting.
        enable_chunked_prefill: Whether a prompt may be split across steps.
        enable_prefix_caching: Whether a prompt's leading blocks still cached are reused
            (vLLM V1's default; only requests that carry token ids can hit).
        scheduler_reserve_full_isl: Admit only when the whole prompt fits in free blocks.
        shutdown_timeout: Seconds to drain in-flight requests on shutdown (0: abort them).
        max_num_queued_reqs: API-server limit on in-flight requests (None: no limit).
        max_num_queued_tokens: API-server limit on prompt tokens still in prefill (None: none).
        scheduling_policy: ``fcfs`` (vLLM's default) or ``priority``: the order of the waiting
            queue and which running request a KV shortage preempts.
        block_size: Tokens per KV block.
        num_gpu_blocks: KV blocks of the engine.
        disable_log_stats: Real vLLM then exposes no ``vllm:*`` metric; recorded for the server.
        enable_log_requests: Recorded only.
        served_model_name: The model name the server reports.
        ignored: Options the simulator accepts, as vLLM does, but does not model, as
            (option name, value as the file gave it) pairs.
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    max_num_active_seqs: int | None = None
    prefill_schedule_interval: int = 1
    long_prefill_token_threshold: int = 0
    long_prefill_token_threshold_adaptive: bool = False
    watermark: float = 0.0
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    scheduler_reserve_full_isl: bool = True
    shutdown_timeout: int = 0
    max_num_queued_reqs: int | None = None
    max_num_queued_tokens: int | None = None
    scheduling_policy: SchedulingPolicy = SchedulingPolicy.FCFS
    block_size: int = 16
    num_gpu_blocks: int = 1
    disable_log_stats: bool = False
    enable_log_requests: bool = False
    served_model_name: str = ""
    ignored: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        problems = settings_problems(self)
        if problems:
            raise SettingsError(problems)

    @property
    def admission_cap(self) -> int:
        """The most requests that may be RUNNING at once."""
        if self.max_num_active_seqs is None:
            return self.max_num_seqs
        return self.max_num_active_seqs

    @classmethod
    def defaults(cls, profile: EngineProfile, **overrides: Any) -> EngineSettings:
        """The defaults of ``vllm serve`` on the profile's hardware, with ``overrides``."""
        values: dict[str, Any] = {
            "max_num_seqs": profile.default_max_num_seqs,
            "max_num_batched_tokens": profile.default_max_num_batched_tokens,
            "block_size": profile.block_size,
            "num_gpu_blocks": profile.kv_blocks,
            "served_model_name": profile.model,
        }
        values.update(overrides)
        return cls(**values)

    def summary(self) -> dict[str, Any]:
        """The honoured settings as a JSON-ready mapping (reports, ``/server_info``)."""
        return {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("ignored", "served_model_name")
        }


def settings_problems(settings: EngineSettings) -> list[tuple[str, str]]:
    """The checks of vLLM 0.33 (``SchedulerConfig`` and friends) that these settings fail."""
    problems: list[tuple[str, str]] = []
    positive = (
        "max_num_seqs",
        "max_num_batched_tokens",
        "prefill_schedule_interval",
        "block_size",
        "num_gpu_blocks",
    )
    for name in positive:
        if getattr(settings, name) < 1:
            problems.append((name, "must be at least 1"))
    for name in ("long_prefill_token_threshold", "shutdown_timeout"):
        if getattr(settings, name) < 0:
            problems.append((name, "must not be negative"))
    for name in ("max_num_active_seqs", "max_num_queued_reqs", "max_num_queued_tokens"):
        value = getattr(settings, name)
        if value is not None and value < (1 if name == "max_num_active_seqs" else 0):
            problems.append((name, "is out of range"))
    if settings.scheduling_policy not in tuple(SchedulingPolicy):
        choices = ", ".join(repr(policy.value) for policy in SchedulingPolicy)
        message = f"invalid choice: {settings.scheduling_policy!r} (choose from {choices})"
        problems.append(("scheduling_policy", message))
    if not 0.0 <= settings.watermark < 1.0:
        problems.append(("watermark", "must be in [0.0, 1.0)"))
    if settings.max_num_batched_tokens < settings.max_num_seqs:
        problems.append(
            (
                "max_num_batched_tokens",
                f"({settings.max_num_batched_tokens}) must be greater than or equal to "
                f"max_num_seqs ({settings.max_num_seqs})",
            )
        )
    active = settings.max_num_active_seqs
    if active is not None and active > settings.max_num_seqs:
        problems.append(
            (
                "max_num_active_seqs",
                f"({active}) cannot be greater than max_num_seqs ({settings.max_num_seqs})",
            )
        )
    return problems
