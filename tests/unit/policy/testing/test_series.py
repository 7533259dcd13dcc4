"""promtool's expanding notation: examples, then properties with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.policy.testing.series import (
    MAX_VALUES,
    SeriesError,
    Value,
    format_series,
    parse_series,
)

_: Value = None


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1", [1.0]),
        ("-2+4x3", [-2.0, 2.0, 6.0, 10.0]),  # promtool's own examples
        (" 1-2x4", [1.0, -1.0, -3.0, -5.0, -7.0]),
        ("1x4", [1.0] * 5),
        ("1 _x3 stale", [1.0, _, _, _, _]),  # a gap cannot increment: _x3 is three gaps
        ("0x2 1+1x2 _x2 5", [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, _, _, 5.0]),
        ("1e-3x1 .5 +7", [0.001, 0.001, 0.5, 7.0]),
        ("1e+2-1e1x2", [100.0, 90.0, 80.0]),
        ("", []),
        ("  \t\n", []),
    ],
)
def test_examples(text: str, values: list[Value]) -> None:
    assert parse_series(text) == values


def test_infinities_and_nan_are_values() -> None:
    parsed = parse_series("Inf -inf NaN")
    assert [repr(v) for v in parsed] == ["inf", "-inf", "nan"]


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("2y30", "'2y30' (column 1) is not a value or an expansion: write e.g.", 1),
        ("0x10 oops", "'oops' (column 6)", 6),
        ("_x0", "'_x0' (column 1) gives no value at all", 1),
        ("1+x3", "'1+x3' (column 1) is not a value", 1),
        ("0x10 1x99999999", f"the series passes {MAX_VALUES} values at column 6", 6),
        ("1x" + "9" * 5000, f"the series passes {MAX_VALUES} values", 1),
        ("\u0663", "is not a value", 1),  # an Arabic-Indic three is not a number here
    ],
)
def test_errors_say_where_and_how(text: str, message: str, column: int) -> None:
    with pytest.raises(SeriesError) as caught:
        parse_series(text)
    assert message in str(caught.value)
    assert caught.value.column == column


def test_the_total_is_capped_across_segments() -> None:
    half = MAX_VALUES // 2
    with pytest.raises(SeriesError, match="passes"):
        parse_series(f"0x{half} 0x{half}")


values = st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=60)


@settings(max_examples=300)
@given(values)
def test_formatted_series_parse_back_the_same(series: list[Value]) -> None:
    assert [repr(v) for v in parse_series(format_series(series))] == [repr(v) for v in series]


@settings(max_examples=300)
@given(
    st.floats(-1e6, 1e6),
    st.sampled_from("+-"),
    st.floats(0, 1e3),
    st.integers(0, 200),
)
def test_expansions_count_n_plus_one_values_by_equal_steps(
    start: float, sign: str, step: float, count: int
) -> None:
    parsed = parse_series(f"{start!r}{sign}{step!r}x{count}")
    signed = step if sign == "+" else -step
    assert len(parsed) == count + 1
    assert parsed == [start + i * signed if signed else start for i in range(count + 1)]


@settings(max_examples=500)
@given(st.one_of(st.text(), st.text(alphabet="0123456789.+-_xeEstalInfNa \t", max_size=40)))
def test_any_text_is_values_or_a_series_error(text: str) -> None:
    column = 0
    try:
        parsed = parse_series(text)
    except SeriesError as exc:
        column, parsed = exc.column, []
    assert column >= 0
    assert all(value is None or isinstance(value, float) for value in parsed)
