from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.control_protocol import (
    MAX_LINE_BYTES,
    ControlReply,
    ControlRequest,
    offset_of,
    page_of,
)
from daemon.core.errors import ControlError


def test_request_and_reply_round_trip() -> None:
    request = ControlRequest("approve", {"id": "p-1", "reason": "ok"})
    assert ControlRequest.decode(request.encode()) == request
    assert ControlReply.decode(ControlReply(ok=True, result={"a": [1]}).encode()).result == {
        "a": [1]
    }
    failed = ControlReply.decode(ControlReply(ok=False, error="nope").encode())
    assert (failed.ok, failed.error) == (False, "nope")


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json\n",
        b"[1,2]\n",
        b'{"command": 3}\n',
        b'{"command": "x", "args": []}\n',
        b"\xff\n",
    ],
)
def test_malformed_requests_are_control_errors(line: bytes) -> None:
    with pytest.raises(ControlError):
        ControlRequest.decode(line)


@given(st.binary(max_size=200))
def test_no_input_breaks_the_decoder_with_anything_but_a_control_error(line: bytes) -> None:
    try:
        ControlRequest.decode(line)
        ControlReply.decode(line)
    except ControlError:
        pass


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"command": "x", "args": {"d": Infinity}}\n', "not a finite number: Infinity"),
        (b'{"command": "x", "args": {"d": NaN}}\n', "not a finite number: NaN"),
        (b'{"command": "x", "args": {"d": -1e999}}\n', "not a finite number: -1e999"),
        (b'{"command": "x", "args": {"d": ' + b"[" * 17 + b"]" * 17 + b"}}\n", "nest at most 16"),
        (b'{"command": "x", "args": {"d": "' + b"y" * (1 << 16) + b'"}}\n', "at most 65536 bytes"),
    ],
)
def test_requests_are_bounded_and_finite(line: bytes, error: str) -> None:
    with pytest.raises(ControlError, match=error):
        ControlRequest.decode(line)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '[[[[[[[[[[[[[[[[[[[[ \\" {{{{{{{{{{{{{{{{{{{{'
    request = ControlRequest("reject", {"id": "p", "reason": text, "x": [[[1e300]]]})
    assert ControlRequest.decode(request.encode()) == request


def test_a_reply_may_carry_what_a_request_may_not() -> None:
    # Replies come from the daemon: status may hold an infinite value, and deep trees are its own.
    line = b'{"ok": true, "result": {"x": Infinity, "y": ' + b"[" * 40 + b"]" * 40 + b"}}\n"
    assert ControlReply.decode(line).ok


def test_a_long_list_is_answered_in_pages_that_each_fit_in_a_reply() -> None:
    # Issue 15, finding 2: 'signals --json' at the store's bound failed with "the governor's
    # reply is larger than the protocol allows".
    rows = [
        {"name": "running", "labels": {"bomb": f"v{n:0100d}"}, "value": 1.0} for n in range(9000)
    ]
    pages: list[list[object]] = []
    offset: int | None = 0
    while offset is not None:
        page, offset = page_of(rows, offset)
        pages.append(page)
        reply = ControlReply(ok=True, result={"signals": page, "next_offset": offset}).encode()
        assert len(reply) <= MAX_LINE_BYTES
    assert len(pages) > 1
    assert [row for page in pages for row in page] == rows


def test_a_page_holds_at_least_one_row_and_the_end_says_so() -> None:
    assert page_of([{"x": "y" * 100}], 0, max_bytes=10) == ([{"x": "y" * 100}], None)
    assert page_of([], 0) == ([], None)
    assert page_of([1, 2, 3], 3) == ([], None)


@pytest.mark.parametrize("offset", [-1, "3", 1.5, True])
def test_an_offset_is_a_whole_number_of_at_least_zero(offset: object) -> None:
    with pytest.raises(ControlError, match="'offset'"):
        offset_of({"offset": offset})
