from __future__ import annotations

import pytest

from daemon.sources.prometheus_results import NoData, QueryFailure, to_samples


def _vector(*series: tuple[dict[str, str], str]) -> list[object]:
    return [{"metric": labels, "value": [1.7e9, value]} for labels, value in series]


def test_a_scalar_is_one_unlabelled_sample() -> None:
    (sample,) = to_samples("s", [1.7e9, "3.5"], (), 10.0, "prometheus")  # type: ignore[misc]
    assert (sample.key.name, sample.key.labels, sample.value, sample.at) == ("s", (), 3.5, 10.0)


def test_a_vector_keeps_instance_job_and_the_keep_list_only() -> None:
    result = _vector(
        ({"__name__": "m", "instance": "h:1", "job": "j", "gpu": "0", "noise": "x"}, "1"),
        ({"__name__": "m", "instance": "h:1", "job": "j", "gpu": "1", "noise": "y"}, "2"),
    )
    samples = to_samples("s", result, {"gpu", "__name__"}, 0.0, "prometheus")
    assert not isinstance(samples, QueryFailure)
    assert [(s.key.labels, s.value) for s in samples] == [
        ((("gpu", "0"), ("instance", "h:1"), ("job", "j")), 1.0),
        ((("gpu", "1"), ("instance", "h:1"), ("job", "j")), 2.0),
    ]


def test_non_finite_series_are_skipped_not_zeroed() -> None:
    samples = to_samples("s", _vector(({"a": "1"}, "NaN"), ({}, "4")), (), 0.0, "p")
    assert not isinstance(samples, QueryFailure)
    assert [s.value for s in samples] == [4.0]


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ([], NoData.EMPTY),
        ([1.7e9, "NaN"], NoData.NOT_A_NUMBER),
        ([1.7e9, "+Inf"], NoData.NOT_A_NUMBER),
        ([1.7e9, "some string"], NoData.NOT_A_NUMBER),
        (_vector(({}, "NaN")), NoData.NOT_A_NUMBER),
        (_vector(({"gpu": "0"}, "1"), ({"gpu": "1"}, "2")), NoData.AMBIGUOUS),
        ([{"metric": {}, "values": [[1, "1"]]}], NoData.REJECTED),
        ({"resultType": "vector"}, NoData.GARBAGE),
        (["x"], NoData.GARBAGE),
        ([{"metric": {}, "value": "1"}], NoData.GARBAGE),
        (None, NoData.GARBAGE),
    ],
)
def test_unusable_results_say_why(result: object, reason: NoData) -> None:
    outcome = to_samples("s", result, (), 0.0, "p")
    assert isinstance(outcome, QueryFailure)
    assert outcome.reason is reason
