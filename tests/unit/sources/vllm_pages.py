"""Helpers shared by the vLLM parsing tests: the fixture pages and ways to read a scrape."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from daemon.sources.samples import Labels, labels_of
from daemon.sources.vllm_metrics import VllmScrape, parse_vllm_metrics

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-metrics"
V0 = (FIXTURES / "v0-docs-excerpt.txt").read_text()
V1_0_10 = (FIXTURES / "v1-0.10-excerpt.txt").read_text()
V0_33 = (FIXTURES / "v0.33-synthesized.txt").read_text()
V0_33_DP2 = (FIXTURES / "v0.33-dp2-derived.txt").read_text()

QWEN = "Qwen/Qwen3-8B"


def parse(text: str, at: float = 100.0) -> VllmScrape:
    return parse_vllm_metrics(text, instance="main", at=at, source="vllm/main")


def values(scrape: VllmScrape, name: str) -> dict[Labels, float]:
    """Every sample named ``name`` by its labels."""
    return {s.key.labels: s.value for s in scrape.samples if s.key.name == name}


def labels(**pairs: str) -> Labels:
    """Canonical labels of instance ``main`` plus ``pairs``."""
    return labels_of({"instance": "main", **pairs})


def histogram_page(name: str, bounds: Sequence[str], counts: Sequence[float]) -> str:
    """A one-histogram vLLM page (single engine) with the given cumulative bucket counts."""
    lines = [f"# TYPE vllm:{name} histogram"]
    for bound, count in zip(bounds, counts, strict=True):
        lines.append(f'vllm:{name}_bucket{{engine="0",le="{bound}",model_name="m"}} {count}')
    lines.append(f'vllm:{name}_count{{engine="0",model_name="m"}} {counts[-1]}')
    lines.append(f'vllm:{name}_sum{{engine="0",model_name="m"}} 1.0')
    return "\n".join(lines) + "\n"
