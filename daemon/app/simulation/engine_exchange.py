"""The simulated server's completions endpoint, in-process: what the batch lane sends to.

The daemon's batch lane sends each line of a job with its HTTP client
(:class:`~daemon.core.http_client.HttpExchange`, the port :class:`~daemon.engine.governor.Governor`
takes as ``batch_exchange``). In a governed simulation :class:`EngineExchange` fills that port:
``POST /v1/completions`` parsed as ``sim serve`` parses it
(:func:`simulator.server.completions.parse_completion_request`: prompt length, ``max_tokens``,
``priority``), submitted to the run's engine at the loop's clock, answered when the engine's
record comes out, in the shape vLLM answers (``usage`` included: the governor counts its own
tokens from it); ``POST /tokenize`` as ``sim serve`` answers it (the batch lane's prefill in
pieces asks it for a text prompt's ids). Why not over loopback HTTP like the probes and
scrapes: a day's batch lane is tens of thousands of long requests, and an abort must reach the
engine the moment the lane cancels a request; here cancelling the awaiting task aborts the
request in the engine at once, as vLLM aborts a request whose client went away.

Failures are the client's, as on a host: between two processes (a restart) the port is closed
(``refused``), a request in flight when the engine went down is cut off (``closed``), a request
still unanswered after the exchange's ``total_s`` is aborted (``timeout``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import CLOSED, REFUSED, TIMEOUT, HttpLimits, HttpResponse
from daemon.engine.batches.prefill_pieces import PIECE_ID_PREFIX, REQUEST_ID_HEADER
from simulator.requests import Outcome
from simulator.server.completions import (
    PRIORITY_HEADER,
    CompletionError,
    choice,
    completion,
    error_body,
    generated_text,
    parse_completion_request,
    parse_tokenize_request,
    tokenized,
    usage,
)
from simulator.server.metrics import max_model_len
from simulator.server.virtual_host import VirtualHost

COMPLETIONS = "/v1/completions"
TOKENIZE = "/tokenize"


class EngineExchange:
    """Answers the batch lane's requests from the run's engine.

    Args:
        host: The simulated server.

    Attributes:
        sent: Requests submitted to the engine (a resend counts again).
        in_flight: Requests submitted and not yet answered.
        priorities: How many requests were sent at each priority.
        pieces: The engine's ids of the requests that were prefill pieces (their
            ``X-Request-Id`` says so): work done, but no batch line's tokens.
    """

    def __init__(self, host: VirtualHost) -> None:
        self._host = host
        self.sent = 0
        self.in_flight = 0
        self.priorities: dict[int, int] = {}
        self.pieces: set[str] = set()

    async def __call__(
        self,
        method: str,
        url: str,
        limits: HttpLimits,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One request to the simulated server (see the module docstring).

        Raises:
            HttpExchangeError: the server is down, went down, or did not answer in time.
        """
        host = self._host
        host.sync()
        if not host.serving:
            message = f"{method} {url}: connection refused (the server is restarting)"
            raise HttpExchangeError(message, REFUSED)
        path = urlsplit(url).path
        if method.upper() == "POST" and path == TOKENIZE:
            return self._tokenize(body)
        if method.upper() != "POST" or path != COMPLETIONS:
            return _json(404, error_body(404, f"no route for {method} {path}"))
        return await self._complete(f"{method} {url}", limits, body, headers or {})

    async def _complete(
        self, what: str, limits: HttpLimits, body: bytes, headers: Mapping[str, str]
    ) -> HttpResponse:
        """``POST /v1/completions``: submitted to the engine, answered from its record."""
        host = self._host
        header = {key.lower(): value for key, value in headers.items()}
        try:
            request = parse_completion_request(
                json.loads(body),
                host.settings.served_model_name,
                header.get(PRIORITY_HEADER.lower()),
            )
        except ValueError:
            return _json(400, error_body(400, "the request body is not JSON"))
        except CompletionError as exc:
            return _json(exc.status, error_body(exc.status, exc.message, exc.param))
        if request.stream:
            return _json(400, error_body(400, "the in-process server does not stream", "stream"))
        submitted, answer = host.submit(
            request.prompt_tokens,
            request.max_tokens,
            priority=request.priority,
            token_ids=request.token_ids,
        )
        self.sent += 1
        self.in_flight += 1
        self.priorities[request.priority] = self.priorities.get(request.priority, 0) + 1
        piece = header.get(REQUEST_ID_HEADER.lower(), "").startswith(PIECE_ID_PREFIX)
        if piece and submitted is not None:
            self.pieces.add(submitted.request_id)
        try:
            async with asyncio.timeout(limits.total_s):
                record = await asyncio.shield(answer)
        except TimeoutError as exc:
            if submitted is not None:
                host.abort(submitted)
            message = f"{what}: no complete answer within {limits.total_s:g} s"
            raise HttpExchangeError(message, TIMEOUT) from exc
        except asyncio.CancelledError:
            # The lane cut the request off: its client went away, and vLLM aborts it.
            if submitted is not None:
                host.abort(submitted)
            raise
        finally:
            self.in_flight -= 1
        if record.outcome is Outcome.COMPLETED:
            text = generated_text(0, record.output_tokens)
            answered = completion(
                record.request_id,
                int(host.epoch + record.finished_at),
                host.settings.served_model_name,
                [choice(text, "length")],
            )
            answered["usage"] = usage(record.prompt_tokens, record.output_tokens)
            return _json(200, answered)
        if record.outcome is Outcome.REJECTED and submitted is None:
            return _json(503, error_body(503, "the server refused the request"))
        message = f"{what}: connection cut off ({record.outcome.value})"
        raise HttpExchangeError(message, CLOSED)

    def _tokenize(self, body: bytes) -> HttpResponse:
        """``POST /tokenize``, as ``sim serve`` answers it."""
        settings = self._host.settings
        try:
            ids = parse_tokenize_request(json.loads(body), settings.served_model_name)
        except ValueError:
            return _json(400, error_body(400, "the request body is not JSON"))
        except CompletionError as exc:
            return _json(exc.status, error_body(exc.status, exc.message, exc.param))
        return _json(200, tokenized(ids, max_model_len(settings.ignored)))


def _json(status: int, document: dict[str, Any]) -> HttpResponse:
    body = json.dumps(document, separators=(",", ":")).encode()
    return HttpResponse(status, (("content-type", "application/json"),), body)
