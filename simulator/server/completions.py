"""The OpenAI completions API as vLLM serves it: parsing a request, shaping the answers.

Pure functions over JSON-ready values; the HTTP handler (:mod:`simulator.server.routes`)
does the I/O. The simulated model has no vocabulary: a string prompt is one token per
whitespace-separated word (the word's id is its CRC-32, so the same words are the same ids,
as ``POST /tokenize`` answers them), a list of token ids one per id, and the generated text is
one word per token, so ``len(text.split())`` of an answer is its ``completion_tokens``. A
prompt's ids name its blocks for the prefix cache (:mod:`simulator.prefix_cache`).

``priority`` (an integer, default 0, lower is served first) is taken as vLLM 0.33 takes it,
from the body or from the ``X-Vllm-Priority`` header, which wins when it is an integer
(``_get_priority`` in ``vllm/entrypoints/generate/base/serving.py``). vLLM 0.33 refuses no
priority under ``--scheduling-policy fcfs``; its FCFS queue never looks at it, and neither
does the simulator's.

Differences from vLLM, by design: one prompt per request (no batch of prompts), ``n`` must
be 1, and ``max_tokens`` defaults to 16 (the OpenAI default; vLLM would fill the rest of the
context window, which the simulator does not model). The simulated model always generates
exactly ``max_tokens`` tokens, so every completed answer ends with ``finish_reason
"length"``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

DEFAULT_MAX_TOKENS = 16
PRIORITY_HEADER = "X-Vllm-Priority"
# vLLM's protocol field (``priority: int = Field(default=0, ge=_INT64_MIN, le=_INT64_MAX)``),
# validated by pydantic in JSON mode as vLLM's server does: "7", true and 7.0 pass, 7.5 and
# null do not.
_PRIORITY = TypeAdapter(Annotated[int, Field(ge=-(2**63), le=2**63 - 1)])
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "again")


class CompletionError(Exception):
    """A request the API refuses; rendered with :func:`error_body`.

    Args:
        status: HTTP status.
        message: What is wrong, for the client.
        param: The request field at fault, if one is.
    """

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """A valid completions request, reduced to what the engine needs.

    Attributes:
        prompt_tokens: Prompt length in tokens.
        max_tokens: Tokens to generate.
        stream: Whether to stream server-sent events.
        include_usage: Whether a streamed answer ends with a usage chunk.
        priority: The scheduling priority (lower first; 0 unless the client gave one).
        token_ids: The prompt's token ids.
    """

    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    priority: int = 0
    token_ids: tuple[int, ...] = ()


def parse_completion_request(
    body: Any, served_model: str, priority_header: str | None = None
) -> CompletionRequest:
    """Validate a ``POST /v1/completions`` body (and the ``X-Vllm-Priority`` header's value).

    Raises:
        CompletionError: 400 for a malformed request, 404 for another model's name.
    """
    _check_body(body, served_model)
    n = body.get("n", 1)
    if n != 1:
        raise CompletionError(400, "the simulated server supports n = 1 only", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise CompletionError(400, "stream must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise CompletionError(400, "stream_options must be an object", "stream_options")
    token_ids = _prompt_ids(body.get("prompt"))
    return CompletionRequest(
        prompt_tokens=len(token_ids),
        max_tokens=_max_tokens(body.get("max_tokens")),
        stream=stream,
        include_usage=bool(options.get("include_usage", False)),
        priority=_priority(body.get("priority", 0), priority_header),
        token_ids=token_ids,
    )


def parse_tokenize_request(body: Any, served_model: str) -> tuple[int, ...]:
    """The token ids of a ``POST /tokenize`` body's ``prompt`` (a string).

    Raises:
        CompletionError: 400 for a malformed request, 404 for another model's name.
    """
    _check_body(body, served_model)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        message = "prompt must be a string (the simulated server tokenizes no chat messages)"
        raise CompletionError(400, message, "prompt")
    return word_ids(prompt)


def _check_body(body: Any, served_model: str) -> None:
    if not isinstance(body, dict):
        raise CompletionError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise CompletionError(404, f"The model `{model}` does not exist.", "model")


def word_ids(text: str) -> tuple[int, ...]:
    """The simulated tokenizer: one id per whitespace-separated word, its CRC-32."""
    return tuple(zlib.crc32(word.encode()) for word in text.split())


def tokenized(token_ids: tuple[int, ...], max_model_len: int) -> dict[str, Any]:
    """The answer to ``POST /tokenize``, as vLLM's ``TokenizeResponse``."""
    return {"count": len(token_ids), "max_model_len": max_model_len, "tokens": list(token_ids)}


def _priority(value: Any, header: str | None) -> int:
    # vLLM validates the body's field first, then lets a header that parses as an integer
    # override it; a header that does not parse is ignored.
    try:
        priority: int = _PRIORITY.validate_json(json.dumps(value))
    except ValidationError as exc:
        message = f"priority: {exc.errors(include_url=False)[0]['msg']}"
        raise CompletionError(400, message, "priority") from exc
    if header is not None:
        try:
            return int(header)
        except ValueError:
            pass
    return priority


def _prompt_ids(prompt: Any) -> tuple[int, ...]:
    # A batch of one is accepted in both spellings: ["text"] and [[1, 2, 3]].
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = word_ids(prompt)
    elif isinstance(prompt, list) and all(
        isinstance(token, int) and not isinstance(token, bool) for token in prompt
    ):
        ids = tuple(prompt)
    else:
        message = "prompt must be a string or a list of token ids (one prompt per request)"
        raise CompletionError(400, message, "prompt")
    if not ids:
        raise CompletionError(400, "prompt cannot be empty", "prompt")
    return ids


def _max_tokens(value: Any) -> int:
    if value is None:
        return DEFAULT_MAX_TOKENS
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CompletionError(400, "max_tokens must be an integer of at least 1", "max_tokens")
    return value


def generated_text(start: int, end: int) -> str:
    """The text of output tokens ``start`` to ``end`` (exclusive): one word each."""
    return "".join(" " + _WORDS[index % len(_WORDS)] for index in range(start, end))


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The ``usage`` object of an answer."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def choice(text: str, finish_reason: str | None) -> dict[str, Any]:
    """One choice of an answer or a streamed chunk."""
    return {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }


def completion(
    request_id: str, created: int, model: str, choices: list[dict[str, Any]]
) -> dict[str, Any]:
    """A ``text_completion`` object: a whole answer, or one chunk of a stream."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
    }


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The error object of vLLM (``ErrorResponse``)."""
    kinds = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
    return {
        "error": {
            "message": message,
            "type": kinds.get(status, "InternalServerError"),
            "param": param,
            "code": status,
        }
    }
