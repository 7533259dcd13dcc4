"""What the simulated server writes to its log: vLLM's level, and a line per request it logs.

vLLM reads its logging level once at start from ``VLLM_LOGGING_LEVEL`` (INFO when unset), and
with ``--enable-log-requests`` it writes one INFO line per request it receives, naming the
request and listing its prompt's token ids (no ``--max-log-len``: the whole prompt). That line
is what fills a log volume under chat traffic: about seven bytes per prompt token. The
simulated server writes the same line (the ids as a fixed five-digit stand-in, since it has
no tokens), so that a log directory grows at vLLM's rate for the level and flag in force: at
WARNING, or without the flag, it writes none.

:func:`request_log_bytes` is that line's length as written (with the log's own prefix), for
whoever needs the growth of a log without writing it: the demo's run without the governor.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

LEVEL_VARIABLE = "VLLM_LOGGING_LEVEL"
_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING}
_LEVELS |= {"ERROR": logging.ERROR, "CRITICAL": logging.CRITICAL}
# One prompt token id as a Python list prints it: five digits, a comma and a space.
_PROMPT_ID_TEXT = "12345, "
# The log's prefix, as ``sim serve`` formats it: "2026-12-02 07:00:00,000 sim-vllm INFO ".
PREFIX_BYTES = len("2026-12-02 07:00:00,000 sim-vllm INFO ")


def logging_level(environment: Mapping[str, str]) -> int:
    """The level ``VLLM_LOGGING_LEVEL`` asks for; INFO when unset or not a level's name."""
    name = environment.get(LEVEL_VARIABLE, "INFO").strip().upper()
    return _LEVELS.get(name, logging.INFO)


def logs_requests(level: int, enable_log_requests: bool) -> bool:
    """Whether a server at ``level`` with the flag as given writes a line per request."""
    return enable_log_requests and level <= logging.INFO


def request_line(request_id: str, prompt_tokens: int, max_tokens: int) -> str:
    """The line vLLM logs when it receives a request (without the log's prefix)."""
    ids = (_PROMPT_ID_TEXT * prompt_tokens).removesuffix(", ")
    return (
        f"Received request {request_id}: params: SamplingParams(n=1, temperature=1.0, "
        f"max_tokens={max_tokens}), prompt_token_ids: [{ids}], lora_request: None."
    )


def request_log_bytes(request_id: str, prompt_tokens: int, max_tokens: int) -> int:
    """Bytes one request's line takes in the log file: prefix, line and newline."""
    return PREFIX_BYTES + len(request_line(request_id, prompt_tokens, max_tokens)) + 1
