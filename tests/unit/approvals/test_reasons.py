"""Reasons people give: one line of plain text, bounded; control characters refused."""

from __future__ import annotations

import re

import pytest

from daemon.approvals.errors import ApprovalError
from daemon.approvals.reasons import MAX_REASON_CHARS, checked_reason


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("load test", "load test"),
        ("  disk\tfull\non   gpu-3 \r\n", "disk full on gpu-3"),
        ("", ""),
        ("x" * MAX_REASON_CHARS, "x" * MAX_REASON_CHARS),
        ("café: 🚧 incident #42", "café: 🚧 incident #42"),
    ],
)
def test_a_plain_reason_is_kept_on_one_line(given: str, kept: str) -> None:
    assert checked_reason(given) == kept


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("x" * (MAX_REASON_CHARS + 1), "at most 500 characters (this one has 501)"),
        ("\x1b[31mred", "character 1 is the control character U+001B"),
        ("ok\x07", "character 3 is the control character U+0007"),
        ("ok \x9b31m", "U+009B"),  # the one-byte CSI of C1
        ("invoice\u202efdp.exe", "U+202E"),
        ("\u2066isolated\u2069", "U+2066"),
    ],
)
def test_a_long_reason_or_a_control_character_is_refused(given: str, error: str) -> None:
    with pytest.raises(ApprovalError, match=re.escape(error)):
        checked_reason(given)
