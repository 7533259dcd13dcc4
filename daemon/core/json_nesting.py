"""How deep a JSON text nests, measured before it is parsed.

Python's ``json`` recurses once per array or object, so a document nested some thousand levels
deep raises :class:`RecursionError` from inside the parser, and even a shallower one that parses
can exhaust the recursion of whatever walks it next. Untrusted JSON (a control-socket request,
a Slack interaction) is measured with :func:`nests_deeper_than` first, in one pass that keeps no
stack, and refused when it nests deeper than its reader allows.
"""

from __future__ import annotations


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects in ``text`` nest deeper than ``limit``, before parsing it."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
