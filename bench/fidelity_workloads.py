"""The workloads of the fidelity benchmark: short, seeded, sized for the tiny model on a CPU.

Each is a :class:`~simulator.synthetic_workloads.WorkloadSpec`, so the real server and the
simulator get the very same arrivals (``generate``), and a vLLM ``--config`` per setting that
both sides read. Rates were chosen with the simulator (the fitted profile) so that the smaller
``max-num-seqs`` queues and the larger does not, and, in the small KV pool, the larger one
preempts and the smaller does not: settings that a governor would have to tell apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.synthetic_workloads import WorkloadSpec

SETTINGS = (4, 16)  # max-num-seqs
SMALL_POOL_BLOCKS = 40  # of 32 tokens: 1,280 tokens of KV

_CONVERSATION = {
    "prompt_tokens": {"median": 128, "p90": 384, "min": 8, "max": 768},
    "output_tokens": {"median": 48, "p90": 160, "min": 2, "max": 256},
}


@dataclass(frozen=True, slots=True)
class FidelityWorkload:
    """One workload and the KV pool it runs in.

    Attributes:
        spec: The arrivals.
        kv_blocks: ``num-gpu-blocks-override``, or None for the profile's pool.
    """

    spec: WorkloadSpec
    kv_blocks: int | None = None

    def vllm_config(self, max_num_seqs: int) -> str:
        """The vLLM ``--config`` YAML of this workload at ``max_num_seqs``."""
        lines = [
            f"max-num-seqs: {max_num_seqs}",
            "block-size: 32",
            "max-model-len: 1024",
            # The simulator has no prefix cache; the prompts share no prefix anyway.
            "enable-prefix-caching: false",
        ]
        if self.kv_blocks is not None:
            lines.append(f"num-gpu-blocks-override: {self.kv_blocks}")
        return "\n".join(lines) + "\n"


WORKLOADS = (
    FidelityWorkload(
        WorkloadSpec.model_validate(
            {
                "name": "steady",
                "description": "Poisson arrivals at 12 rps, conversation-like lengths",
                "duration_s": 20,
                "seed": 1,
                "arrivals": {"rate_rps": 12, "cv": 1.0},
                **_CONVERSATION,
            }
        )
    ),
    FidelityWorkload(
        WorkloadSpec.model_validate(
            {
                "name": "burst",
                "description": "5 rps, then 25 rps for 4 s from t=6 s",
                "duration_s": 16,
                "seed": 2,
                "arrivals": {"rate_rps": 5, "cv": 1.0},
                "bursts": [{"start_s": 6, "duration_s": 4, "multiplier": 5}],
                **_CONVERSATION,
            }
        )
    ),
    FidelityWorkload(
        WorkloadSpec.model_validate(
            {
                "name": "long-outputs",
                "description": "20 rps for 3 s of 150-280-token outputs in a 1,280-token pool",
                "duration_s": 3,
                "seed": 3,
                "arrivals": {"rate_rps": 20, "cv": 1.0},
                "prompt_tokens": {"median": 32, "p90": 64, "min": 8, "max": 128},
                "output_tokens": {"median": 200, "p90": 260, "min": 150, "max": 280},
            }
        ),
        kv_blocks=SMALL_POOL_BLOCKS,
    ),
)
