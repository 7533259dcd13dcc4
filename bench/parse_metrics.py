"""Parse time of a 0.33-shaped vLLM ``/metrics`` page of 4 engines, next to prometheus-client.

The page is the 0.33 fixture with every family's series replicated for engines 0 to 3 (values
scaled per engine), as a 4-way data-parallel server renders it. Each round times, back to back
on the same page, prometheus-client's own ``text_string_to_metric_families`` (every sample
consumed) and ``parse_vllm_metrics`` (which calls it, then maps and aggregates); the medians
and their ratio are the overhead of the mapping.

    .venv/bin/python -m bench.parse_metrics [--rounds 200] [--engines 4] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from daemon.sources.vllm_metrics import parse_vllm_metrics

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "vllm-metrics" / "v0.33-synthesized.txt"


def data_parallel_page(engines: int) -> str:
    """The 0.33 fixture with each family's samples repeated for ``engines`` engines."""
    blocks: list[list[str]] = []
    for line in FIXTURE.read_text().splitlines():
        if line.startswith("# HELP") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    out: list[str] = []
    for block in blocks:
        out.extend(line for line in block if line.startswith("#"))
        samples = [line for line in block if not line.startswith("#")]
        out.extend(_for_engine(line, engine) for engine in range(engines) for line in samples)
    return "\n".join(out) + "\n"


def _for_engine(line: str, engine: int) -> str:
    """A fixture sample line relabelled for ``engine``, its value scaled so engines differ."""
    head, _, value = line.replace('engine="0"', f'engine="{engine}"').rpartition(" ")
    if "_created" in head or "cache_config_info" in head:
        return f"{head} {value}"
    return f"{head} {float(value) * (engine + 1)!r}"


def _raw(text: str) -> None:
    for family in text_string_to_metric_families(text):
        for _sample in family.samples:
            pass


def _ours(text: str) -> None:
    parse_vllm_metrics(text, instance="main", at=0.0, source="vllm/main")


def measure(text: str, rounds: int) -> dict[str, list[float]]:
    """Seconds per parse for each parser, alternating so that noise hits both alike."""
    parsers: dict[str, Callable[[str], None]] = {
        "prometheus_client text_string_to_metric_families": _raw,
        "parse_vllm_metrics": _ours,
    }
    for parse in parsers.values():
        parse(text)  # warm up caches and imports
    timings: dict[str, list[float]] = {name: [] for name in parsers}
    for _ in range(rounds):
        for name, parse in parsers.items():
            started = time.perf_counter()
            parse(text)
            timings[name].append(time.perf_counter() - started)
    return timings


def main() -> None:
    """Measure and print the medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    text = data_parallel_page(args.engines)
    lines = text.count("\n")
    samples = len(parse_vllm_metrics(text, instance="main", at=0.0, source="x").samples)
    timings = measure(text, args.rounds)
    medians = {name: statistics.median(values) * 1000 for name, values in timings.items()}
    print(
        f"{args.engines}-engine 0.33-shaped page: {len(text)} bytes, {lines} lines,"
        f" {samples} canonical samples; median of {args.rounds} rounds"
    )
    for name, median in medians.items():
        print(f"{name:<52} {median:8.3f} ms")
    raw, ours = medians.values()
    print(f"ratio parse_vllm_metrics / prometheus_client: {ours / raw:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"median_ms": medians, "ratio": ours / raw}, indent=2))


if __name__ == "__main__":
    main()
