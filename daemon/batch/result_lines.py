"""A request's result as one line of the OpenAI batch output (or errors) format.

``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``: a request
answered 2xx goes to the output file; one answered otherwise (after its retries) goes to the
errors file with the server's answer in ``response``; one never answered (the server
unreachable past the retry window, the job cancelled or past its deadline) goes to the errors
file with ``response`` null and ``error: {"code", "message"}``, as OpenAI writes
``batch_cancelled`` and ``batch_expired``. The ``id`` is derived from the job and the line, so
that a line sent again after a crash keeps its id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

CANCELLED = "batch_cancelled"
EXPIRED = "batch_expired"
INVALID_RESPONSE = "invalid_response"


class ResultFile(StrEnum):
    """Which file a result line belongs in."""

    OUTPUT = "output"
    ERRORS = "errors"


@dataclass(frozen=True, slots=True)
class ResultLine:
    """One result, ready to append: which file, and the line's bytes (newline included)."""

    custom_id: str
    file: ResultFile
    data: bytes


def answered(
    job_id: str, line_no: int, custom_id: str, *, status: int, request_id: str, body: bytes
) -> ResultLine:
    """The result of a request the server answered with ``status`` and ``body``.

    ``request_id`` is the answer's ``x-request-id`` header; without one, the body's ``id``.
    """
    try:
        document: Any = json.loads(body)
    except (ValueError, RecursionError):
        text = body[:2048].decode("utf-8", errors="replace")
        message = f"the server answered {status} with a body that is not JSON: {text!r}"
        return failed(job_id, line_no, custom_id, INVALID_RESPONSE, message)
    if not request_id and isinstance(document, dict) and isinstance(document.get("id"), str):
        request_id = document["id"]  # vLLM's own id of the request (cmpl-...)
    response = {"status_code": status, "request_id": request_id, "body": document}
    where = ResultFile.OUTPUT if 200 <= status < 300 else ResultFile.ERRORS
    return _line(job_id, line_no, custom_id, where=where, response=response, error=None)


def failed(job_id: str, line_no: int, custom_id: str, code: str, message: str) -> ResultLine:
    """The result of a request that got no usable answer (or was never sent)."""
    error = {"code": code, "message": message}
    return _line(job_id, line_no, custom_id, where=ResultFile.ERRORS, response=None, error=error)


def _line(
    job_id: str,
    line_no: int,
    custom_id: str,
    *,
    where: ResultFile,
    response: dict[str, Any] | None,
    error: dict[str, str] | None,
) -> ResultLine:
    document = {
        "id": f"batch_req_{job_id.removeprefix('batch_')}_{line_no}",
        "custom_id": custom_id,
        "response": response,
        "error": error,
    }
    data = json.dumps(document, separators=(",", ":")).encode() + b"\n"
    return ResultLine(custom_id, where, data)
