"""A page of a shape seen before is read by its numbers alone, with the same result (issue 15).

Finding 10: parsing each live server's page in full every 2 s was most of the daemon's CPU.
The memo must never change what a page means: every test compares a page read through a primed
memo with the same page read in full, on the fixture pages and on pages made odd on purpose.
"""

from __future__ import annotations

import math
import re

import pytest

from daemon.core.errors import MetricsParseError
from daemon.sources.page_shapes import PageMemo
from daemon.sources.vllm_metrics import VllmPagePlan, VllmScrape, parse_vllm_metrics
from tests.unit.sources.vllm_pages import FIXTURES, V0, V0_33, V0_33_DP2, V1_0_10

PAGES = {
    "v0": V0,
    "v1-0.10": V1_0_10,
    "0.33": V0_33,
    "dp2": V0_33_DP2,
    "real-idle": (FIXTURES / "real-0.32-cpu" / "idle.txt").read_text(),
    "real-preempting": (FIXTURES / "real-0.32-cpu" / "preempting.txt").read_text(),
}
_NUMBER_AT_END = re.compile(r"^([^#\n][^\n]* )([-+0-9.eE]+|NaN|[-+]?Inf)$", re.M)


def _parse(text: str, memo: PageMemo[VllmPagePlan] | None = None) -> VllmScrape:
    return parse_vllm_metrics(text, instance="main", at=7.0, source="vllm/main", memo=memo)


def _primed(text: str) -> PageMemo[VllmPagePlan]:
    """A memo that has learned ``text``'s shape (two pages of it in a row)."""
    memo = PageMemo[VllmPagePlan]()
    _parse(text, memo)
    _parse(text, memo)
    return memo


def _renumbered(text: str, change: object) -> str:
    """``text`` with every sample's number replaced by ``change(index, number)``."""
    counter = iter(range(1_000_000))

    def replace(match: re.Match[str]) -> str:
        return match.group(1) + str(change(next(counter), match.group(2)))  # type: ignore[operator]

    return _NUMBER_AT_END.sub(replace, text)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_page_of_a_known_shape_is_read_by_its_numbers_with_the_same_result(name: str) -> None:
    page = PAGES[name]
    memo = _primed(page)
    later = _renumbered(page, lambda i, number: float(number) * 1.5 + i)
    assert later != page
    recalled = memo.recalled
    assert _parse(later, memo) == _parse(later)
    assert memo.recalled == recalled + 1  # read through the memo, not in full


@pytest.mark.parametrize("name", sorted(PAGES))
def test_odd_numbers_on_a_known_shape_mean_what_they_mean_in_full(name: str) -> None:
    """NaN, infinities, negatives, -0, integers and exponents, as the full parse reads them."""
    page = PAGES[name]
    odd = ["NaN", "+Inf", "-Inf", "-3", "-0", "7", "1e308", "2.5E-3", ".5", "12."]
    later = _renumbered(page, lambda i, _number: odd[i % len(odd)])
    assert _parse(later, _primed(page)) == _parse(later)


@pytest.mark.parametrize("number", ["1_000", "0x10", "1" * 41, "nan", "abc", "Infinity"])
def test_a_number_off_the_plain_shape_is_read_in_full(number: str) -> None:
    """Such a number sends the page to prometheus_client: accepted or refused, as in full."""
    later = _renumbered(V0_33, lambda i, n: number if i == 3 else n)
    memo = _primed(V0_33)
    try:
        expected: VllmScrape | str = _parse(later)
    except MetricsParseError as exc:
        expected = str(exc)
    try:
        found: VllmScrape | str = _parse(later, memo)
    except MetricsParseError as exc:
        found = str(exc)
    assert found == expected


def test_a_page_that_changes_shape_is_read_in_full_and_learned_again() -> None:
    memo = _primed(V0_33)
    extra = 'vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 4.0\n'
    grown = V0_33 + extra
    assert _parse(grown, memo) == _parse(grown)
    assert _parse(grown, memo) == _parse(grown)  # the second page of the new shape: learned
    recalled = memo.recalled
    assert _parse(grown, memo) == _parse(grown)
    assert memo.recalled == recalled + 1


def test_a_page_with_a_duplicate_series_is_refused_every_time() -> None:
    line = 'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0\n'
    page = V0_33 + line
    memo = PageMemo[VllmPagePlan]()
    for _ in range(3):
        with pytest.raises(MetricsParseError, match="duplicate series"):
            _parse(page, memo)
    assert memo.recalled == 0


def test_a_memo_learned_for_one_instance_is_not_used_for_another() -> None:
    memo = _primed(V0_33)
    other = parse_vllm_metrics(V0_33, instance="other", at=7.0, source="vllm/other", memo=memo)
    assert other == parse_vllm_metrics(V0_33, instance="other", at=7.0, source="vllm/other")
    assert all(sample.key.label("instance") == "other" for sample in other.samples)


def test_the_values_are_the_new_page_s() -> None:
    memo = _primed(V0_33)
    later = V0_33.replace(
        'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0',
        'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 5.0',
    )
    assert later != V0_33
    running = [s for s in _parse(later, memo).samples if s.key.name == "vllm_num_requests_running"]
    assert [s.value for s in running] == [5.0]
    assert not any(math.isnan(s.value) for s in running)


@pytest.mark.parametrize("name", ["0.33", "dp2"])
def test_a_shape_learned_from_a_page_with_a_nan_reads_finite_pages_as_in_full(name: str) -> None:
    """A NaN changes what a page gives (an aggregate left out): the memo does not keep that."""
    page = PAGES[name]
    with_nan = _renumbered(page, lambda i, number: "NaN" if i == 5 else number)
    memo = _primed(with_nan)
    later = _renumbered(page, lambda i, number: float(number) + i)
    assert _parse(later, memo) == _parse(later)
    assert _parse(with_nan, memo) == _parse(with_nan)
    assert memo.recalled == 2  # both read through the memo


@pytest.mark.parametrize("name", sorted(PAGES))
def test_zeros_keep_their_sign_as_in_full(name: str) -> None:
    """``-0`` reads as 0 (int() first), ``-0.0`` as -0.0, and a sum of one engine's -0.0 as 0."""
    page = PAGES[name]
    zeros = ["-0", "-0.0", "0", "+0", "-0e3", "-.0"]
    later = _renumbered(page, lambda i, _number: zeros[i % len(zeros)])

    def signs(scrape: VllmScrape) -> list[tuple[object, float]]:
        return [(sample.key, math.copysign(1.0, sample.value)) for sample in scrape.samples]

    assert signs(_parse(later, _primed(page))) == signs(_parse(later))


def test_a_setting_of_minus_zero_in_a_label_keeps_its_sign_as_in_full() -> None:
    """An info family's value is its label's: ``-0.0`` there is summed to 0, as in full."""
    page = V0_33.replace('num_gpu_blocks="29205"', 'num_gpu_blocks="-0.0"')
    later = _renumbered(page, lambda i, number: float(number) + i)

    def signs(scrape: VllmScrape) -> list[tuple[object, float]]:
        return [(sample.key, math.copysign(1.0, sample.value)) for sample in scrape.samples]

    memo = _primed(page)
    assert signs(_parse(later, memo)) == signs(_parse(later))
    assert memo.recalled == 1  # read through the memo
