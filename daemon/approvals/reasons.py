"""Reasons people give (a freeze's, a rejection's): one line of plain text, of bounded length.

A reason is written to a freeze file, stored with a proposal, logged, and shown in terminals and
Slack. Whitespace runs (newlines, tabs) become one space; any other control character (an ANSI
escape that would restyle or clear the reader's terminal) and the Unicode controls that reorder
text on screen (bidirectional overrides, as in "Trojan Source") are refused rather than removed,
so that what is stored is what the person typed; so is a reason longer than
:data:`MAX_REASON_CHARS`.
"""

from __future__ import annotations

import unicodedata

from daemon.approvals.errors import ApprovalError

MAX_REASON_CHARS = 500
# Embeddings, overrides and isolates: U+202A..U+202E and U+2066..U+2069.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def checked_reason(text: str) -> str:
    """``text`` on one line, whitespace runs made one space.

    Raises:
        ApprovalError: longer than :data:`MAX_REASON_CHARS`, or a control character in it.
    """
    flat = " ".join(text.split())
    if len(flat) > MAX_REASON_CHARS:
        message = (
            f"a reason is at most {MAX_REASON_CHARS} characters (this one has {len(flat)}); "
            "link to the details instead"
        )
        raise ApprovalError(message)
    for position, char in enumerate(flat, start=1):
        if unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS:
            message = (
                f"a reason is plain text: character {position} is the control character "
                f"U+{ord(char):04X}; write it without escapes"
            )
            raise ApprovalError(message)
    return flat
