"""page_samples reads what prometheus_client reads, and reads plain pages without it.

The fast reading is a second parser, so the test of it is agreement: on every real page we
hold, on lines of every odd shape, and on fuzzed text, it gives prometheus_client's samples
(names, labels, values, in order), or fails where prometheus_client fails.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from daemon.sources import metric_text
from daemon.sources.metric_text import ParsedSample, page_samples

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-metrics"
PAGES = sorted(p for p in FIXTURES.rglob("*.txt") if p.name != "serve-help-all.txt")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _theirs(text: str) -> list[ParsedSample] | str:
    try:
        return [
            (sample.name, sample.labels, float(sample.value))
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]
    except Exception as exc:  # the failure itself is what is compared
        return f"{type(exc).__name__}: {exc}"


def _ours(text: str) -> list[ParsedSample] | str:
    try:
        return list(page_samples(text))
    except Exception as exc:  # the failure itself is what is compared
        return f"{type(exc).__name__}: {exc}"


def _same(text: str) -> None:
    ours, theirs = _ours(text), _theirs(text)
    if isinstance(ours, str) or isinstance(theirs, str):
        assert ours == theirs
        return
    assert len(ours) == len(theirs)
    for (name, labels, value), (their_name, their_labels, their_value) in zip(
        ours, theirs, strict=True
    ):
        assert (name, labels) == (their_name, their_labels)
        assert value == their_value or (math.isnan(value) and math.isnan(their_value))
        assert math.copysign(1, value) == math.copysign(1, their_value)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_real_pages_are_read_alike_and_without_prometheus_client(page: Path) -> None:
    text = page.read_text()
    _same(text)
    # The point of it: a plain page never needs prometheus_client's character-wise reading.
    assert len(metric_text._plain_samples(text)) > 0


@pytest.mark.parametrize(
    "text",
    [
        '# TYPE a counter\na{x="1"} 3\n',  # a counter named without _total gets it
        "# TYPE a_total counter\na_total 3\na_created 1.7e9\n",
        "# HELP a doc\n# TYPE a counter\na 1\n# TYPE a gauge\na 2\n",  # retyped mid-family
        '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_count 2\nh_sum 3\n',
        '# TYPE s summary\ns{quantile="0.5"} 1\ns_count 2\ns_sum 3\n',
        "a 1\nb 2\na 3\n",  # untyped singletons
        "# HELP a\na 1\n",
        "# HELP\na 1\n",
        "# TYPE a\na 1\n",
        "# TYPE a wrong\na 1\n",
        "# TYPE a info\na 1\n",
        '# HELP a "quoted" doc\na 1\n',
        '# HELP "a" doc\na 1\n',
        '#" x" HELP a doc\na 1\n',
        "# HELP a d\xa0oc\na 1\n",
        "# HELP\xa0a doc\na 1\n",
        "# a comment\n#\n#x\na 1\n",
        "# TYPE _total counter\n_total 1\n",
        'a{x="1\\"2"} 1\n',  # escapes
        'a{x="1\\n2",y="\\\\"} 1\n',
        'a{x="1",x="2"} 1\n',  # duplicate label
        'a{__name__="b"} 1\n',
        '{__name__="b"} 1\n',
        'a{__x="1"} 1\n',
        'a{x="1",} 1\n',
        "a{} 1\n",
        'a { x = "1" } 1\n',
        'a{x="1"}  1\n',
        'a{x="1"}\t1\n',
        "a 1 1700000000000\n",  # timestamp
        "a 1 2 3\n",
        'a 1 # {trace="x"} 1\n',
        'a{x="{},=#  \\t"} 1\n',
        'a{x="é"} 1\n',
        "a -0\n",
        "a +12\n",
        "a 0012\n",
        "a 1.\n",
        "a .5\n",
        "a 1e3\n",
        "a +Inf\n",
        "a -Inf\n",
        "a NaN\n",
        "a nan\n",
        "a inf\n",
        "a 1_000\n",
        "a 0x10\n",
        "a " + "9" * 400 + "\n",
        "a " + "9" * 39 + "\n",
        "a\n",
        "a \n",
        "1a 1\n",
        "a:b:c 1\n",
        "a 1\r\nb 2\r\n",
        "  a 1  \n\n\n",
        "garbage{\n",
        "",
    ],
)
def test_odd_lines_are_read_as_prometheus_client_reads_them(text: str) -> None:
    _same(text)


@FUZZ
@given(
    st.text(alphabet=st.sampled_from(list('{}",=\\# \t\n:_.+-019aeINTYPEHLcounterx')), max_size=200)
)
def test_text_made_of_exposition_characters(text: str) -> None:
    _same(text)


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "# HELP a doc",
                "# TYPE a counter",
                "# TYPE a_total counter",
                "# TYPE h histogram",
                "# TYPE a gauge",
                "# HELP h x",
                'a{x="1"} 1',
                "a 2",
                "a_total 3",
                "a_created 4",
                'h_bucket{le="1"} 1',
                "h_count 1",
                "h_sum 2",
                'a{x="1",y="2"} -0',
                'a{x="\\""} 1',
                "b 1 2",
                "",
                "# x",
            ]
        ),
        max_size=12,
    )
)
def test_pages_of_plain_and_odd_lines(lines: list[str]) -> None:
    _same("\n".join(lines))
