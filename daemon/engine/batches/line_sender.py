"""Sending one line of a batch to the target's vLLM, with retries, until it has a result.

A retryable outcome (:mod:`daemon.batch.retries`: 429, 5xx, a refused connection while vLLM
restarts, a timeout) is tried again after a backoff delay, for as long as ``retry_window_s``
after the line's first failure; then the last answer (or failure) is the line's result. Each
attempt is bounded by ``request_timeout_s``. Cancelling :meth:`LineSender.send` aborts the
request at once (the HTTP client owns nothing beyond its ``await``).

Where the lane says so (the server runs priority scheduling), the body is sent with the batch
priority in ``priority``, replacing any the line had: the lane's priority is the governor's,
not the file's. The file's bytes are sent as they are otherwise. With ``pieces``, a long prompt's
pieces go first (:mod:`daemon.engine.batches.prefill_pieces`), once, before the first attempt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from daemon.batch.input_file import BatchLine
from daemon.batch.result_lines import ResultLine, answered, failed
from daemon.batch.retries import retryable_failure, retryable_status
from daemon.core.backoff import Backoff
from daemon.core.batch_settings import BatchSection
from daemon.core.clock import Clock
from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import HttpExchange, HttpLimits, http_request
from daemon.engine.batches.prefill_pieces import PrefillPieces

# A completion's answer is small; a chat answer with logprobs of a long output is the largest.
MAX_ANSWER_BYTES = 64 << 20


class LineSender:
    """Sends lines of one job to one server."""

    def __init__(
        self,
        job_id: str,
        base_url: str,
        settings: BatchSection,
        clock: Clock,
        *,
        priority: Callable[[], int | None] = lambda: None,
        exchange: HttpExchange = http_request,
        pieces: PrefillPieces | None = None,
    ) -> None:
        self._job_id = job_id
        self._pieces = pieces
        self._exchange = exchange
        self._priority = priority
        self._base_url = base_url.rstrip("/")
        self._settings = settings
        self._clock = clock
        self._limits = HttpLimits(
            total_s=settings.request_timeout_s, max_body_bytes=MAX_ANSWER_BYTES
        )

    async def send(self, line: BatchLine) -> ResultLine:
        """The line's result: the server's answer, or why there is none."""
        backoff = Backoff(self._settings.retry_base_s, self._settings.retry_cap_s)
        first_failure: float | None = None
        if self._pieces is not None:
            await self._pieces.send_ahead(line)
        while True:
            result, retryable = await self._attempt(line)
            now = self._clock.monotonic()
            first_failure = now if first_failure is None else first_failure
            delay = backoff.next_delay()
            if not retryable or now + delay - first_failure > self._settings.retry_window_s:
                return result
            await asyncio.sleep(delay)

    async def _attempt(self, line: BatchLine) -> tuple[ResultLine, bool]:
        """One exchange: its result, and whether another attempt may go differently."""
        try:
            response = await self._exchange(
                "POST",
                self._base_url + line.url,
                self._limits,
                body=with_priority(line.body, self._priority()),
                headers={"Content-Type": "application/json"},
            )
        except HttpExchangeError as exc:
            result = failed(self._job_id, line.line_no, line.custom_id, exc.kind, str(exc))
            return result, retryable_failure(exc.kind)
        request_id = response.header("x-request-id") or ""
        result = answered(
            self._job_id,
            line.line_no,
            line.custom_id,
            status=response.status,
            request_id=request_id,
            body=response.body,
        )
        return result, retryable_status(response.status)


def with_priority(body: bytes, priority: int | None) -> bytes:
    """``body`` with ``"priority": priority`` set; as it is when ``priority`` is None."""
    if priority is None:
        return body
    request = json.loads(body)
    request["priority"] = priority
    return json.dumps(request, separators=(",", ":")).encode()
