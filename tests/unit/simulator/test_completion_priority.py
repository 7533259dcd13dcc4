"""A completion request's ``priority``, read as vLLM 0.33's OpenAI server reads it."""

from __future__ import annotations

import pytest

from simulator.server.completions import CompletionError, parse_completion_request

MODEL = "m"


@pytest.mark.parametrize(
    ("body", "header", "priority"),
    [
        ({"prompt": "x"}, None, 0),
        ({"prompt": "x", "priority": 1000}, None, 1000),
        ({"prompt": "x", "priority": -5}, None, -5),
        # pydantic's lax JSON mode, as in vLLM: a numeric string, a boolean, a whole float.
        ({"prompt": "x", "priority": "7"}, None, 7),
        ({"prompt": "x", "priority": True}, None, 1),
        ({"prompt": "x", "priority": 7.0}, None, 7),
        # X-Vllm-Priority wins when it is an integer, and is ignored when it is not.
        ({"prompt": "x", "priority": 1000}, "3", 3),
        ({"prompt": "x", "priority": 1000}, "urgent", 1000),
    ],
)
def test_the_priority_comes_from_the_body_or_the_header(
    body: dict[str, object], header: str | None, priority: int
) -> None:
    assert parse_completion_request(body, MODEL, header).priority == priority


@pytest.mark.parametrize("value", ["high", None, 1.5, 2**63, -(2**63) - 1])
def test_a_priority_that_is_no_64_bit_integer_is_refused(value: object) -> None:
    with pytest.raises(CompletionError) as caught:
        parse_completion_request({"prompt": "x", "priority": value}, MODEL)
    assert (caught.value.status, caught.value.param) == (400, "priority")
