"""The HTTP API of the simulated server: vLLM's endpoints the governor and clients use.

``/health`` and ``/ping`` (200; 503 once the engine has stopped), ``/version``,
``/v1/models``, ``POST /v1/completions`` (streaming or not) and ``/metrics``. While the
server drains after SIGTERM, ``/health`` stays 200 and new completions get HTTP 500 with the
message of vLLM's engine client, as vLLM 0.32 answers them (observed on a real server). Every
answer is counted in ``http_requests_total{handler, method, status}`` with the status class
("2xx", "5xx"), as vLLM's HTTP instrumentation counts them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from simulator.requests import Outcome, RejectReason
from simulator.server import completions
from simulator.server.completions import CompletionError, CompletionRequest
from simulator.server.driver import RealTimeDriver
from simulator.server.metrics import max_model_len
from simulator.server.tickets import Ticket

VLLM_VERSION = "0.33.0"

_REJECTIONS = {
    RejectReason.UNAVAILABLE: (500, "cannot schedule new futures after shutdown"),
    RejectReason.MAX_NUM_QUEUED_REQS: (503, "Too many requests in flight (max-num-queued-reqs)."),
    RejectReason.MAX_NUM_QUEUED_TOKENS: (
        503,
        "Too many prompt tokens waiting (max-num-queued-tokens).",
    ),
    RejectReason.TOO_LONG: (400, "The prompt and max_tokens do not fit in the KV cache."),
}


class VllmApi:
    """The endpoints, bound to one driver.

    Args:
        driver: The engine's driver.
        registry: What ``/metrics`` renders.
        model: The served model name.
    """

    def __init__(self, driver: RealTimeDriver, registry: CollectorRegistry, model: str) -> None:
        self._driver = driver
        self._registry = registry
        self._model = model
        self._started = int(time.time())
        self._answers = Counter(
            "http_requests",
            "Total number of requests by method, status and handler.",
            ("handler", "method", "status"),
            registry=registry,
        )

    def app(self) -> web.Application:
        """An aiohttp application with every route."""
        app = web.Application(middlewares=[self._count])
        app.router.add_get("/health", self.health)
        app.router.add_get("/ping", self.health)
        app.router.add_post("/ping", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/metrics", self.metrics)
        return app

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Count each answer by route and status class."""
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            self._answered(request, exc.status)
            raise
        self._answered(request, response.status)
        return response

    def _answered(self, request: web.Request, status: int) -> None:
        route = request.match_info.route.resource
        path = route.canonical if route is not None else "none"
        self._answers.labels(path, request.method, f"{status // 100}xx").inc()

    async def health(self, _: web.Request) -> web.Response:
        """200 while the engine lives (draining included), 503 once it has stopped."""
        return web.Response(status=503 if self._driver.stopped else 200)

    async def version(self, _: web.Request) -> web.Response:
        """The vLLM version the simulator imitates."""
        return web.json_response({"version": VLLM_VERSION})

    async def models(self, _: web.Request) -> web.Response:
        """The OpenAI model list: the one served model."""
        model = {
            "id": self._model,
            "object": "model",
            "created": self._started,
            "owned_by": "vllm",
            "root": self._model,
            "parent": None,
        }
        return web.json_response({"object": "list", "data": [model]})

    async def metrics(self, _: web.Request) -> web.Response:
        """Prometheus text format 0.0.4, whatever the Accept header asks (``vllm:`` names)."""
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    async def tokenize(self, request: web.Request) -> web.Response:
        """``POST /tokenize`` of a string prompt: its ids as the simulated model reads them."""
        try:
            ids = completions.parse_tokenize_request(await request.json(), self._model)
        except ValueError:  # not JSON, or not UTF-8
            return _error(400, "the request body is not valid JSON")
        except CompletionError as exc:
            return _error(exc.status, exc.message, exc.param)
        limit = max_model_len(self._driver.engine.settings.ignored)
        return web.json_response(completions.tokenized(ids, limit))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``: one prompt, streamed as SSE or answered at the end."""
        try:
            body = await request.json()
            parsed = completions.parse_completion_request(
                body, self._model, request.headers.get(completions.PRIORITY_HEADER)
            )
        except ValueError:  # not JSON, or not UTF-8
            return _error(400, "the request body is not valid JSON")
        except CompletionError as exc:
            return _error(exc.status, exc.message, exc.param)
        outcome = self._driver.submit(
            parsed.prompt_tokens,
            parsed.max_tokens,
            streaming=parsed.stream,
            priority=parsed.priority,
            token_ids=parsed.token_ids,
        )
        if isinstance(outcome, RejectReason):
            status, message = _REJECTIONS[outcome]
            return _error(status, message)
        try:
            if parsed.stream:
                return await self._stream(request, outcome, parsed)
            return await self._answer(outcome, parsed)
        finally:
            # Cancelled, or the client went away mid-stream: vLLM aborts the request.
            self._driver.abort(outcome)

    async def _answer(self, ticket: Ticket, parsed: CompletionRequest) -> web.Response:
        while ticket.record is None:
            await ticket.wait()
        record = ticket.record
        if record.outcome is not Outcome.COMPLETED:
            return _error(503, "The request was aborted: the server is shutting down.")
        text = completions.generated_text(0, record.output_tokens)
        answer = completions.completion(
            ticket.request_id,
            int(time.time()),
            self._model,
            [completions.choice(text, "length")],
        )
        answer["usage"] = completions.usage(parsed.prompt_tokens, record.output_tokens)
        return web.json_response(answer)

    async def _stream(
        self, request: web.Request, ticket: Ticket, parsed: CompletionRequest
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await response.prepare(request)
        created = int(time.time())
        sent = 0
        try:
            while True:
                await ticket.wait()
                record = ticket.record
                generated = ticket.generated
                finish = None
                if record is not None:
                    finish = "length" if record.outcome is Outcome.COMPLETED else "abort"
                if generated > sent or finish is not None:
                    text = completions.generated_text(sent, generated)
                    chunk = completions.completion(
                        ticket.request_id, created, self._model, [completions.choice(text, finish)]
                    )
                    await _send(response, chunk)
                    sent = generated
                if record is not None:
                    break
            if parsed.include_usage:
                chunk = completions.completion(ticket.request_id, created, self._model, [])
                chunk["usage"] = completions.usage(parsed.prompt_tokens, sent)
                await _send(response, chunk)
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away; the caller aborts the request
        return response


async def _send(response: web.StreamResponse, chunk: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")


def _error(status: int, message: str, param: str | None = None) -> web.Response:
    return web.json_response(completions.error_body(status, message, param), status=status)
