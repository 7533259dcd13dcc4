from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.control_protocol import ControlReply, ControlRequest
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
