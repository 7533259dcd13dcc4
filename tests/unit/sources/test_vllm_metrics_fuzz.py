"""Fuzzing the parser: whatever a server answers, only MetricsParseError may escape."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.core.errors import MetricsParseError
from daemon.sources.vllm_metrics import VllmScrape
from tests.unit.sources.vllm_pages import V0, V0_33_DP2, V1_0_10, parse

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAGES = st.sampled_from([V0, V1_0_10, V0_33_DP2])
ODD_VALUES = st.sampled_from(
    ["NaN", "+Inf", "-Inf", "nan", "1e400", "-0", "0x10", "1_000", "", "  ", "1 2 3", "\x00"]
)
ODD_TEXT = st.text(
    alphabet=st.sampled_from(list('{}",=\\# \t\n\r\x00\ufffd:_.-+eE019aINé')),
    max_size=8,
)


def _parse_or_parse_error(text: str) -> VllmScrape | None:
    try:
        scrape = parse(text)
    except MetricsParseError:
        return None
    # What does come back is usable: finite values, every sample labelled with its instance.
    assert all(math.isfinite(sample.value) for sample in scrape.samples)
    assert all(sample.key.label("instance") == "main" for sample in scrape.samples)
    return scrape


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _parse_or_parse_error(text)


@FUZZ
@given(st.text(alphabet=st.sampled_from(list('{}",=\\# \n:_.+-0123456789levNaInf')), max_size=300))
def test_text_made_of_exposition_characters(text: str) -> None:
    _parse_or_parse_error("vllm:" + text)


@st.composite
def mutated_pages(draw: st.DrawFn) -> str:
    """A real page with a few structural mutations applied."""
    lines = draw(PAGES).splitlines(keepends=True)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        index = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        line = lines[index]
        match draw(st.sampled_from(["duplicate", "value", "flip", "insert", "drop"])):
            case "duplicate":
                lines.insert(index, line)
            case "value":
                head = line.rstrip("\n").rpartition(" ")[0] or line
                lines[index] = f"{head} {draw(ODD_VALUES)}\n"
            case "flip":
                at = draw(st.integers(min_value=0, max_value=max(len(line) - 1, 0)))
                lines[index] = line[:at] + draw(ODD_TEXT) + line[at + 1 :]
            case "insert":
                lines.insert(index, draw(ODD_TEXT) + "\n")
            case _:
                del lines[index]
    text = "".join(lines)
    if draw(st.booleans()):
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    return text


@FUZZ
@given(mutated_pages())
def test_mutated_real_pages(text: str) -> None:
    _parse_or_parse_error(text)


@FUZZ
@given(PAGES, st.data())
def test_a_page_cut_at_a_line_boundary_still_parses(page: str, data: st.DataObject) -> None:
    lines = page.splitlines(keepends=True)
    kept = data.draw(st.integers(min_value=0, max_value=len(lines)))
    text = "".join(lines[:kept])
    if any(line.startswith("vllm") for line in lines[:kept]):
        assert _parse_or_parse_error(text) is not None
    else:
        _parse_or_parse_error(text)
