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
