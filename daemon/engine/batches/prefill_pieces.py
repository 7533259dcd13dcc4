"""A batch prompt prefilled in pieces through vLLM's prefix cache, so no step carries it whole.

vLLM prefills a waiting prompt in one step when the step's token budget allows (8,192 tokens
by default), and an online request that arrives meanwhile waits for that step: priority
orders the waiting queue, it never shortens a step already planned. vLLM's own cap on a
prefill's chunk (``--long-prefill-token-threshold``) caps online prompts too. The lane caps
only its own: before a line's request, it sends the prompt's leading ``piece_tokens``, then
twice as many, and so on, each as a one-token completion at the lane's priority. Each piece
finds the blocks the one before it left in vLLM's prefix cache (on by default in vLLM V1) and
prefills only its own part; the line's request then prefills what is left. The pieces go one
at a time per lane (``slots``), so the lane adds at most one piece to a step, however wide.

What it costs: a request and one sampled token per piece, a ``/tokenize`` call for a text
prompt, and, where the cache evicted a piece's blocks before the next came (a pool full of
online work), that part prefilled again. What it never changes: the line's own request and
its answer, which are sent and written exactly as without pieces. A piece that fails ends the
pieces of that line; the line goes as it is, with its retries.

Only ``/v1/completions`` lines whose prompt is one text or one list of token ids are cut; a
chat line, or several prompts in one line, go whole.

Without the prefix cache a piece is pure waste: its prefill is thrown away and the line's
request prefills the whole prompt again. So before its first piece the lane reads the server's
``vllm:cache_config_info``: where it says ``enable_prefix_caching="False"`` (``vllm serve
--no-enable-prefix-caching``), no piece is sent for the rest of the job and the log says why.
A page that does not say (an older vLLM, a server that does not answer) leaves the pieces as
the operator configured them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from daemon.batch.input_file import BatchLine
from daemon.batch.own_traffic import usage_in
from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import HttpExchange, HttpLimits
from daemon.sources.metric_text import page_samples

COMPLETIONS = "/v1/completions"
TOKENIZE = "/tokenize"
# The largest answer a piece's exchange takes: a tokenized prompt (``/tokenize``), ~7 bytes a
# token in JSON, so 16 MiB is over two million tokens; a piece's own answer is one token.
PIECE_ANSWER_BYTES = 16 << 20

# A piece's request id says what it is, in vLLM's logs and to a simulation's accounting
# (vLLM takes the X-Request-Id header as the request's id).
REQUEST_ID_HEADER = "X-Request-Id"
PIECE_ID_PREFIX = "batch-piece-"

# (prompt tokens, generated tokens) of one answered piece: the governor's own traffic.
Tally = Callable[[tuple[int, int]], None]

METRICS = "/metrics"
# vLLM's page is tens of KB; a cap well above that still bounds a hostile one.
METRICS_PAGE_BYTES = 8 << 20
CACHE_INFO = "vllm:cache_config_info"

log = logging.getLogger(__name__)


class PrefillPieces:
    """Sends the pieces of one line's prompt ahead of it.

    Args:
        base_url: The server's URL.
        piece_tokens: The tokens a piece adds to the one before it.
        slots: The lane's pieces in flight at once.
        timeout_s: Each exchange's bound in time.
        priority: The lane's priority now (None: send none).
        tally: Counts each answered piece as the governor's own traffic.
        exchange: The HTTP client.
    """

    def __init__(
        self,
        base_url: str,
        piece_tokens: int,
        slots: asyncio.Semaphore,
        timeout_s: float,
        *,
        priority: Callable[[], int | None],
        tally: Tally,
        exchange: HttpExchange,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._piece_tokens = piece_tokens
        self._slots = slots
        self._limits = HttpLimits(total_s=timeout_s, max_body_bytes=PIECE_ANSWER_BYTES)
        self._priority = priority
        self._tally = tally
        self._exchange = exchange
        self._cache_on: bool | None = None  # what the server's page said; None: not said yet
        self._cache_read = asyncio.Lock()  # one read of the page at a time, and one warning
        self._cache_asked = False

    async def send_ahead(self, line: BatchLine) -> int:
        """Send ``line``'s pieces; the pieces answered (0 for a line that is not cut)."""
        body = _completion_body(line)
        if body is None or not await self._prefix_cache_on():
            return 0
        ids = await self._token_ids(body)
        if ids is None:
            return 0
        answered = 0
        for end in piece_ends(len(ids), self._piece_tokens):
            piece = {"prompt": list(ids[:end]), "max_tokens": 1}
            # What names the line's blocks in vLLM's cache names the pieces' too.
            piece.update({key: body[key] for key in ("model", "cache_salt") if key in body})
            priority = self._priority()
            if priority is not None:
                piece["priority"] = priority
            async with self._slots:
                usage = await self._post(COMPLETIONS, piece, f"{PIECE_ID_PREFIX}{uuid.uuid4().hex}")
            if usage is None:
                break
            self._tally(usage)
            answered += 1
        return answered

    async def _prefix_cache_on(self) -> bool:
        """False once the server's page says it runs without the prefix cache (see above)."""
        async with self._cache_read:
            if not self._cache_asked:
                self._cache_asked = True
                self._cache_on = await self._page_says_prefix_caching()
                if self._cache_on is False:
                    log.warning(
                        "batch prompts go whole to %s: its vllm:cache_config_info says"
                        ' enable_prefix_caching="False", and a piece needs the prefix cache to'
                        " be of any use (prefill_piece_tokens is ignored for this job)",
                        self._base_url,
                    )
        return self._cache_on is not False

    async def _page_says_prefix_caching(self) -> bool | None:
        limits = HttpLimits(total_s=self._limits.total_s, max_body_bytes=METRICS_PAGE_BYTES)
        try:
            page = await self._exchange("GET", self._base_url + METRICS, limits)
        except HttpExchangeError:
            return None
        if page.status != 200:
            return None
        return prefix_caching_in(page.body.decode("utf-8", errors="replace"))

    async def _token_ids(self, body: dict[str, Any]) -> Sequence[int] | None:
        prompt = body["prompt"]
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if isinstance(prompt, list):
            ok = all(isinstance(token, int) and not isinstance(token, bool) for token in prompt)
            return prompt if ok else None
        if not isinstance(prompt, str) or len(prompt) < self._piece_tokens:
            return None  # a text shorter in characters than a piece is shorter in tokens
        ask: dict[str, Any] = {"prompt": prompt}
        # The line's own tokenization: its model's tokenizer, with or without special tokens.
        ask.update({key: body[key] for key in ("model", "add_special_tokens") if key in body})
        answer = await self._request(TOKENIZE, ask)
        tokens = answer.get("tokens") if answer is not None else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return None
        return tokens

    async def _post(
        self, path: str, body: dict[str, Any], request_id: str
    ) -> tuple[int, int] | None:
        """A piece's (prompt, generated) tokens; None when it was not answered."""
        return usage_in(await self._request(path, body, {REQUEST_ID_HEADER: request_id}))

    async def _request(
        self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        try:
            response = await self._exchange(
                "POST",
                self._base_url + path,
                self._limits,
                body=json.dumps(body, separators=(",", ":")).encode(),
                headers={"Content-Type": "application/json", **(headers or {})},
            )
        except HttpExchangeError:
            return None
        if response.status != 200:
            return None
        try:
            answer = json.loads(response.body)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None


def prefix_caching_in(page: str) -> bool | None:
    """What a vLLM ``/metrics`` page says of the prefix cache; None where it says nothing.

    A page the sources' reader refuses says nothing either.
    """
    try:
        for name, labels, _ in page_samples(page):
            if name == CACHE_INFO and labels.get("enable_prefix_caching") in ("True", "False"):
                return labels["enable_prefix_caching"] == "True"
    except ValueError:
        return None
    return None


def piece_ends(prompt_tokens: int, piece_tokens: int) -> range:
    """Where the pieces of a prompt end: every ``piece_tokens``, short of the prompt's end."""
    return range(piece_tokens, prompt_tokens, piece_tokens)


def _completion_body(line: BatchLine) -> dict[str, Any] | None:
    if line.url != COMPLETIONS:
        return None
    try:
        body = json.loads(line.body)
    except ValueError:
        return None
    if not isinstance(body, dict) or "prompt" not in body:
        return None
    return body
