"""Input files are validated whole, and every problem is named as file:line: what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.batch.errors import BatchFileError
from daemon.batch.input_file import parse_batch_bytes, read_batch_file

FILE = Path("/jobs/night.jsonl")


def _line(custom_id: object = "a", **overrides: object) -> str:
    document = {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/completions",
        "body": {"prompt": "hi", "max_tokens": 4},
    }
    document.update(overrides)
    return json.dumps(document)


def _problems(text: str, max_lines: int = 100) -> tuple[str, ...]:
    with pytest.raises(BatchFileError) as caught:
        parse_batch_bytes(FILE, text.encode(), max_lines=max_lines)
    return caught.value.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"{_line('a')}\n{_line('b')}\n{_line('a')}\n",
            "night.jsonl:3: custom_id 'a' repeats line 1",
        ),
        (
            f"{_line('a')}\n{{not json\n",
            "night.jsonl:2: is not valid JSON (Expecting property name",
        ),
        (_line(url="/v1/embeddings"), "night.jsonl:1: url must be one of /v1/completions, "),
        (_line(method="GET"), "night.jsonl:1: method must be \"POST\", not 'GET'"),
        (_line(custom_id=""), "night.jsonl:1: custom_id must be a non-empty string"),
        (_line(custom_id=7), "night.jsonl:1: custom_id must be a non-empty string"),
        (_line(body=[1]), "night.jsonl:1: body must be a JSON object"),
        (_line(body={"stream": True}), "night.jsonl:1: body.stream must be false or absent"),
        (_line(extra=1), "night.jsonl:1: unknown key(s) 'extra'"),
        ("[1, 2]", "night.jsonl:1: must be a JSON object"),
        ('{"custom_id": NaN}', "night.jsonl:1: is not valid JSON (NaN is not JSON)"),
        ("[" * 100_000, "night.jsonl:1: is not valid JSON (nested too deeply)"),
        ("\n\n", "night.jsonl:0: holds no request"),
    ],
)
def test_a_bad_line_is_named_with_its_file_and_line(text: str, expected: str) -> None:
    problems = _problems(text)
    assert any(problem.startswith(f"{FILE.parent}/{expected}") for problem in problems), problems


def test_every_problem_is_reported_not_only_the_first() -> None:
    text = "\n".join([_line("a"), "oops", _line("b", url="/x"), _line("a")])
    problems = _problems(text)
    assert [problem.split(":")[1] for problem in problems] == ["2", "3", "4"]


def test_too_many_lines_and_too_many_bytes_are_refused(tmp_path: Path) -> None:
    text = "\n".join(_line(f"id{index}") for index in range(5))
    assert _problems(text, max_lines=4)[0].endswith(
        "holds more than [batch] max_lines (4) requests"
    )
    path = tmp_path / "big.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        BatchFileError, match=r"big.jsonl:0: is larger than \[batch\] max_file_bytes"
    ):
        read_batch_file(path, max_bytes=100, max_lines=100)


def test_an_unreadable_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(BatchFileError, match=r"missing.jsonl:0: cannot be read"):
        read_batch_file(tmp_path / "missing.jsonl", max_bytes=100, max_lines=100)


def test_blank_lines_are_skipped_and_line_numbers_kept() -> None:
    batch = parse_batch_bytes(FILE, f"\n{_line('a')}\n  \n{_line('b')}\n".encode(), max_lines=10)
    assert [(line.line_no, line.custom_id) for line in batch.lines] == [(2, "a"), (4, "b")]


_IDS = st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=1, max_size=30)
_BODIES = st.dictionaries(
    st.text(max_size=8).filter(lambda key: key != "stream"),
    st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.none()),
    max_size=4,
)


@given(ids=_IDS.map(lambda ids: list(dict.fromkeys(ids))), body=_BODIES)
def test_a_valid_file_reads_back_every_request_once_in_order(
    ids: list[str], body: dict[str, object]
) -> None:
    text = "\n".join(_line(custom_id, body=body) for custom_id in ids) + "\n"
    batch = parse_batch_bytes(FILE, text.encode(), max_lines=100)
    assert [line.custom_id for line in batch.lines] == ids
    assert [line.line_no for line in batch.lines] == list(range(1, len(ids) + 1))
    assert all(json.loads(line.body) == body for line in batch.lines)


@given(ids=_IDS, repeat=st.integers(min_value=0, max_value=29))
def test_a_repeated_custom_id_is_always_refused(ids: list[str], repeat: int) -> None:
    ids = [*ids, ids[repeat % len(ids)]]
    text = "\n".join(_line(custom_id) for custom_id in ids)
    problems = _problems(text)
    assert any("repeats line" in problem for problem in problems)


@given(data=st.binary(max_size=400))
def test_any_bytes_are_either_accepted_or_refused_with_located_problems(data: bytes) -> None:
    problems: tuple[str, ...] = ()
    try:
        batch = parse_batch_bytes(FILE, data, max_lines=100)
    except BatchFileError as exc:
        problems = exc.problems
    if problems:
        assert all(problem.startswith(f"{FILE}:") for problem in problems)
    else:
        assert len({line.custom_id for line in batch.lines}) == len(batch.lines)
