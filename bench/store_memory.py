"""Memory of the signal store at its bound: every series full, measured as the process's RSS.

Fills a store with ``--series`` series of ``--points`` points each (the defaults are
``[signals]``'s: 10,000 and 512), with keys shaped like a vLLM per-engine bucket series, and
prints what the process's resident memory grew by, beside the store's documented budget
(``memory_budget_bytes``) where the store has one. With ``--scrape``, the samples come a
scrape at a time, as a polled source's do (``add_scrape``: the series share one time column).

    .venv/bin/python -m bench.store_memory [--series 10000] [--points 512] [--scrape]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _key(n: int) -> SeriesKey:
    labels = {
        "engine": str(n % 8),
        "instance": f"gpu-{n // 2000}",
        "le": f"{n % 40 / 10:.1f}",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        "series": str(n),  # one distinct series each
    }
    return SeriesKey("vllm_ttft_seconds_bucket", tuple(sorted(labels.items())))


def measure(series: int, points: int, *, scrape: bool = False) -> dict[str, float]:
    """Fill a store to its bound (a scrape at a time with ``scrape``) and say what it cost."""
    gc.collect()
    before = _rss_bytes()
    started = time.perf_counter()
    store = SignalStore(points_per_series=points, max_series=series)
    keys = [_key(n) for n in range(series)]
    add = store.add_scrape if scrape else store.add
    for at in range(points):
        add(Sample(key, 1.0, float(at), "vllm/main") for key in keys)
    fill_s = time.perf_counter() - started
    gc.collect()
    grown = _rss_bytes() - before
    budget = getattr(store, "memory_budget_bytes", None)
    return {
        "series": store.series_count,
        "points": store.point_count,
        "rss_grown_mib": round(grown / 2**20, 1),
        "bytes_per_point": round(grown / max(store.point_count, 1), 1),
        "budget_mib": round(budget / 2**20, 1) if budget else -1,
        "fill_s": round(fill_s, 1),
    }


def main() -> None:
    """Measure and print the outcome as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=512)
    parser.add_argument("--scrape", action="store_true", help="add a scrape at a time")
    args = parser.parse_args()
    print(json.dumps(measure(args.series, args.points, scrape=args.scrape), indent=2))


if __name__ == "__main__":
    main()
