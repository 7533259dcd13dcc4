"""Bounds on one target's page and the parse in slices (issue 15, finding 2).

A cardinality bomb (100,000 distinct label values, 8 MB) was parsed in one go on the event
loop and stored until the store's global cap was full: seconds without a watchdog ping, and
no room left for the healthy target's series.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.core.errors import MetricsParseError
from daemon.sources.metric_pages import PageLimits, page_slices
from daemon.sources.vllm_metrics import parse_vllm_metrics, parse_vllm_metrics_gently
from tests.support.hostile_metrics import cardinality_bomb

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-metrics"
PAGES = sorted(FIXTURES.glob("*.txt"))
V0_33 = (FIXTURES / "v0.33-synthesized.txt").read_bytes()


def _samples(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return [
        (sample.name, tuple(sorted(sample.labels.items())), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
@pytest.mark.parametrize("lines_per_slice", [1, 2, 7, 50])
def test_a_page_parsed_in_slices_gives_the_samples_of_the_whole(
    page: Path, lines_per_slice: int
) -> None:
    text = page.read_text()
    sliced = [sample for piece in page_slices(text, lines_per_slice) for sample in _samples(piece)]
    assert sliced == _samples(text)


def test_a_counter_split_across_slices_keeps_its_type() -> None:
    # Exposed without _total, a counter's samples get it from their # TYPE line only.
    text = "# TYPE vllm:x counter\n" + "".join(f'vllm:x{{n="{n}"}} {n}\n' for n in range(5))
    sliced = [sample for piece in page_slices(text, 2) for sample in _samples(piece)]
    assert sliced == _samples(text)
    assert {name for name, _, _ in sliced} == {"vllm:x_total"}


def test_the_gentle_parse_gives_what_the_parse_in_one_go_gives() -> None:
    text = cardinality_bomb(V0_33, 900).decode()
    limits = PageLimits()
    whole = parse_vllm_metrics(text, instance="t", at=1.0, source="vllm/t", limits=limits)
    gentle = asyncio.run(
        parse_vllm_metrics_gently(text, instance="t", at=1.0, source="vllm/t", limits=limits)
    )
    assert gentle == whole
    assert len(whole.samples) > 900


def test_a_page_with_more_samples_than_allowed_is_refused_unparsed() -> None:
    text = cardinality_bomb(V0_33, 5_000).decode()
    with pytest.raises(MetricsParseError, match="max_page_samples") as refused:
        parse_vllm_metrics(
            text, instance="t", at=1.0, source="vllm/t", limits=PageLimits(max_samples=4_000)
        )
    assert refused.value.detail == "too-many-samples"


def test_a_label_with_more_distinct_values_than_allowed_refuses_the_page() -> None:
    text = cardinality_bomb(V0_33, 300).decode()
    limits = PageLimits(max_label_values=200)
    with pytest.raises(MetricsParseError, match="'bomb' has more than 200") as refused:
        parse_vllm_metrics(text, instance="t", at=1.0, source="vllm/t", limits=limits)
    assert refused.value.detail == "label-cardinality"


@pytest.mark.parametrize(
    "labels",
    [
        ",".join(f'l{n}="x"' for n in range(17)),  # too many labels
        'l="' + "x" * 600 + '"',  # too long
    ],
    ids=["many", "long"],
)
def test_labels_too_many_or_too_long_for_an_identity_refuse_the_page(labels: str) -> None:
    text = V0_33.decode() + f"vllm:num_requests_running{{{labels}}} 1\n"
    with pytest.raises(MetricsParseError, match="the page is refused") as refused:
        parse_vllm_metrics(text, instance="t", at=1.0, source="vllm/t")
    assert refused.value.detail == "label-cardinality"


def test_labels_of_families_the_governor_does_not_read_are_not_counted() -> None:
    bomb = "".join(f'python_info{{id="{n}"}} 1\n' for n in range(300))
    scrape = parse_vllm_metrics(
        V0_33.decode() + bomb,
        instance="t",
        at=1.0,
        source="vllm/t",
        limits=PageLimits(max_label_values=200),
    )
    assert scrape.samples
