"""A bounded load of OpenAI completions on loopback, from threads, that notices every failure.

Each of ``clients`` threads sends ``requests_per_client`` completions one after the other (a
closed loop, as ``vllm bench serve --max-concurrency`` does), each on a fresh connection, and
records how it ended: the status, the tokens received, and any error on the wire (a reset, a
truncated stream, a timeout), so a test can assert that nothing was dropped.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one request ended.

    Attributes:
        status: HTTP status, or None when no response came.
        tokens: Completion tokens received (``usage``, or counted chunks when streamed).
        error: What went wrong on the wire, or None.
        body: The body of a non-200 answer.
        headers: Its headers, lower-cased.
    """

    status: int | None
    tokens: int
    error: str | None = None
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """A 200 with no error on the wire."""
        return self.status == 200 and self.error is None


def complete(
    port: int, max_tokens: int, *, stream: bool = False, extra: Mapping[str, Any] | None = None
) -> Outcome:
    """One completion through ``127.0.0.1:port``; ``extra`` adds to (or replaces) the body."""
    body = {"prompt": "one two three four", "max_tokens": max_tokens, "stream": stream}
    body.update(extra or {})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request(
            "POST",
            "/v1/completions",
            body=json.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        headers = tuple((name.lower(), value) for name, value in response.getheaders())
        if response.status != 200:
            return Outcome(response.status, 0, body=response.read(), headers=headers)
        if not stream:
            answer = json.loads(response.read())
            return Outcome(200, int(answer["usage"]["completion_tokens"]))
        return _streamed(response)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Outcome(None, 0, error=f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


def _streamed(response: http.client.HTTPResponse) -> Outcome:
    tokens = 0
    for raw in response:
        line = raw.decode().strip()
        if not line:
            continue
        data = line.removeprefix("data: ")
        if data == "[DONE]":
            return Outcome(200, tokens)
        chunk = json.loads(data)
        tokens += len(chunk["choices"][0]["text"].split()) if chunk["choices"] else 0
    return Outcome(200, tokens, error="the stream ended without [DONE]")


class Load:
    """``clients`` closed-loop clients in threads; a context manager that waits for them.

    Each client sends up to ``requests_per_client`` requests, fewer once :meth:`stop` is called.
    """

    def __init__(
        self,
        port: int,
        *,
        clients: int,
        requests_per_client: int,
        max_tokens: int,
        stream: bool = False,
        extra: Mapping[str, Any] | None = None,
        retry_after: bool = False,
    ) -> None:
        self.port = port
        # A polite client waits as long as a refusal's Retry-After says (a gate's 503) before
        # its next request, instead of spinning on refusals and starving the machine.
        self.retry_after = retry_after
        self.extra = extra
        self._stopped = threading.Event()
        self.clients = clients
        self.requests_per_client = requests_per_client
        self.max_tokens = max_tokens
        self.stream = stream
        self._pool = ThreadPoolExecutor(max_workers=clients, thread_name_prefix="load")
        self._futures: list[Future[list[Outcome]]] = []

    def _client(self, number: int) -> list[Outcome]:
        # Every other client streams when asked to, so both kinds cross the test's actions.
        stream = self.stream and number % 2 == 0
        outcomes = []
        for _ in range(self.requests_per_client):
            if self._stopped.is_set():
                break
            outcome = complete(self.port, self.max_tokens, stream=stream, extra=self.extra)
            outcomes.append(outcome)
            wait = dict(outcome.headers).get("retry-after", "")
            if self.retry_after and wait.isdigit():
                self._stopped.wait(min(float(wait), 5.0))
        return outcomes

    def stop(self) -> None:
        """Send no further requests (those under way finish)."""
        self._stopped.set()

    def all_sending(self) -> bool:
        """Every client still has requests to send: the load has not begun to run dry."""
        return not any(future.done() for future in self._futures)

    def __enter__(self) -> Self:
        self._futures = [self._pool.submit(self._client, n) for n in range(self.clients)]
        return self

    def outcomes(self) -> list[Outcome]:
        """Every request's outcome, once all clients are done."""
        return [outcome for future in self._futures for outcome in future.result()]

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Requests are bounded by their timeout, so this wait is bounded too.
        self._pool.shutdown(wait=True, cancel_futures=True)
