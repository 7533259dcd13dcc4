"""Engine profiles: step time, KV cache and restart time of one model on one GPU set-up.

A profile is a YAML data file (``simulator/profiles/*.yaml``) validated by
:class:`EngineProfile`; unknown keys are errors. The step-time model extends BLIS's linear
fit of one vLLM engine step (docs/sources.md#step-times) with a context term::

    step_us = beta0 + beta1 * prefill_tokens + beta2 * decode_tokens + beta3 * context_tokens

where ``context_tokens`` is the summed KV context (tokens already in the cache) of the
sequences scheduled in the step. BLIS has no such term, so it underestimates decode cost at
long context. ``beta3`` is derived, not fitted: a decode step is memory-bound, ``beta0`` is
dominated by reading the weights once, and each context token makes the attention kernels
read that token's K and V once more. At the bandwidth the weight read achieves, one context
token therefore costs ``beta0_weight_read * kv_bytes_per_token / weight_bytes``; for
Llama-3.1-8B on one H100 that is 4.79 ms * 131,072 B / 16.06 GB = 0.039 us (0.04 in the
profile), for Llama-3.3-70B over TP4 10.5 ms * 81,920 B / 35.3 GB per GPU = 0.024 us (0.025).
At short context the term vanishes and the BLIS figures hold; with the 8B pool full (467k
tokens) it adds ~19 ms to every step.

Two optional terms price the way in (:mod:`simulator.front_end`): ``frontend_us_per_request``,
the API server's serial work per request, and ``frontend_latency_us``, the rest of a request's
round trip. Both are 0 in the GPU profiles (BLIS has no such term there, and the API server has
cores of its own); the CPU profile fits them (bench/fit_cpu_profile.py).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from simulator.errors import SpecError, SpecIssue
from simulator.shipped import PROFILE_DIR, shipped_profiles
from simulator.spec_files import load_mapping, validate

# vLLM 0.33 captures CUDA graphs for batch sizes up to min(2 * max_num_seqs, 512) on H100
# (1024 on data-centre Blackwell), also capped by the token budget: `_set_cudagraph_sizes`
# in vllm/config/vllm.py. Past max_num_seqs = 256 the set no longer grows.
_MAX_CAPTURE_SIZE_H100 = 512


class EngineProfile(BaseModel):
    """One model on one GPU configuration, as the simulator sees it.

    Attributes:
        name: The profile's name, as ``--profile`` spells it.
        model: The model id vLLM would serve (``/v1/models``, the ``model_name`` label).
        beta0_us: Fixed cost of one engine step (µs).
        beta1_us_per_prefill_token: Cost of one uncached prompt token in a step (µs).
        beta2_us_per_decode_token: Cost of one decode token in a step (µs).
        beta3_us_per_context_token: Cost of one token of KV context of a scheduled sequence (µs).
        frontend_us_per_request: Serial work of the API server per request, before the
            scheduler sees it (µs; 0: none).
        frontend_latency_us: Constant delay of every request on top of it (µs; 0: none).
        kv_blocks: KV cache blocks the engine has.
        block_size: Tokens per KV block.
        restart_s: Downtime of a restart at the default settings, warm compile cache (s).
        cuda_graph_capture_s: The part of ``restart_s`` spent capturing CUDA graphs (s).
        default_max_num_seqs: ``max_num_seqs`` when the vLLM config does not set it.
        default_max_num_batched_tokens: ``max_num_batched_tokens`` when not set.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    beta0_us: float = Field(gt=0)
    beta1_us_per_prefill_token: float = Field(ge=0)
    beta2_us_per_decode_token: float = Field(ge=0)
    beta3_us_per_context_token: float = Field(ge=0)
    frontend_us_per_request: float = Field(default=0.0, ge=0)
    frontend_latency_us: float = Field(default=0.0, ge=0)
    kv_blocks: int = Field(ge=1)
    block_size: int = Field(ge=1)
    restart_s: float = Field(ge=0)
    cuda_graph_capture_s: float = Field(default=0.0, ge=0)
    default_max_num_seqs: int = Field(ge=1)
    default_max_num_batched_tokens: int = Field(ge=1)

    def step_time_s(self, prefill_tokens: int, decode_tokens: int, context_tokens: int) -> float:
        """Duration of one engine step in seconds."""
        micros = (
            self.beta0_us
            + self.beta1_us_per_prefill_token * prefill_tokens
            + self.beta2_us_per_decode_token * decode_tokens
            + self.beta3_us_per_context_token * context_tokens
        )
        return micros * 1e-6

    def restart_downtime_s(self, max_num_seqs: int, max_num_batched_tokens: int) -> float:
        """Downtime of a restart into these settings.

        ``restart_s`` holds at the profile's defaults; CUDA-graph capture, its
        ``cuda_graph_capture_s`` part, scales with the number of graphs vLLM captures, which
        grows with ``max_num_seqs`` up to 256 and then stays flat.
        """
        default = _capture_graph_count(
            self.default_max_num_seqs, self.default_max_num_batched_tokens
        )
        wanted = _capture_graph_count(max_num_seqs, max_num_batched_tokens)
        return self.restart_s + self.cuda_graph_capture_s * (wanted - default) / max(default, 1)


def load_profile(name_or_path: str | Path) -> EngineProfile:
    """Load a shipped profile by name (``llama-3.1-8b-h100-tp1``) or any profile file by path.

    Raises:
        SpecError: the file is missing, unreadable or invalid (each problem located).
    """
    path = Path(name_or_path)
    shipped = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file() and shipped.is_file():
        path = shipped
    elif not path.is_file():
        names = ", ".join(shipped_profiles())
        message = f"no such profile file, and no shipped profile of that name ({names})"
        raise SpecError([SpecIssue(path, 0, 0, "", message)])
    document, locations = load_mapping(path)
    return validate(EngineProfile, document, path, locations)


def _capture_graph_count(max_num_seqs: int, max_num_batched_tokens: int) -> int:
    largest = min(2 * max_num_seqs, _MAX_CAPTURE_SIZE_H100, max_num_batched_tokens)
    sizes = {size for size in (1, 2, 4) if size <= largest}
    sizes.update(range(8, min(largest + 1, 256), 8))
    sizes.update(range(256, largest + 1, 16))
    return len(sizes)
