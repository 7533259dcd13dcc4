"""Reading one number out of an MQTT payload, without ever raising.

A payload is either a plain number (``42.5``) or JSON holding one at a field path
(``{"data": {"temp_c": 61.5}}`` with path ``data.temp_c``). Anything else is a
:class:`Rejection`, returned rather than raised: a device sending garbage is an everyday event,
not an error, and exceptions per message would be the slowest way to say so.
"""

from __future__ import annotations

import json
import math
from enum import Enum

# A telemetry reading is a few hundred bytes; a megabyte of JSON is a mistake or an attack, and
# parsing it would stall the loop.
MAX_PAYLOAD_BYTES = 64 * 1024


class Rejection(Enum):
    """Why a payload gave no value."""

    OVERSIZED = "payload larger than 64 KiB"
    NOT_JSON = "payload is not UTF-8 JSON or a plain number"
    FIELD_MISSING = "field not found in the payload"
    NOT_A_NUMBER = "value is not a number"
    NOT_FINITE = "value is NaN or infinite"


def _no_constants(name: str) -> float:
    # Python's json accepts NaN and Infinity, which are not JSON; refuse them as JSON does.
    raise ValueError(name)


# One decoder for every message: ``json.loads`` with options builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def read_value(payload: bytes, path: tuple[str, ...]) -> float | Rejection:
    """The number at ``path`` in ``payload`` (the payload itself when ``path`` is empty)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Rejection.OVERSIZED
    try:
        # MQTT payloads are opaque bytes; telemetry in UTF-8 is the only text form accepted.
        document = _DECODER.decode(payload.decode())
    except ValueError:  # covers UnicodeDecodeError and json.JSONDecodeError
        return Rejection.NOT_JSON
    for key in path:
        if isinstance(document, dict) and key in document:
            document = document[key]
        elif isinstance(document, list) and key.isdigit() and int(key) < len(document):
            document = document[int(key)]
        else:
            return Rejection.FIELD_MISSING
    # bool is an int in Python, but ``true`` is not a reading.
    if isinstance(document, bool) or not isinstance(document, int | float):
        return Rejection.NOT_A_NUMBER
    try:
        value = float(document)
    except OverflowError:  # an integer too large for a float
        return Rejection.NOT_FINITE
    return value if math.isfinite(value) else Rejection.NOT_FINITE
