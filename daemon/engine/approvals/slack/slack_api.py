"""The Web API calls the approvals make, with the retry rules that keep them safe.

slack-sdk's :class:`~slack_sdk.web.async_client.AsyncWebClient` does the HTTP; its own retry
handlers are switched off, because the default one repeats a call whose connection was cut,
and a ``chat.postMessage`` whose answer was lost has often posted already (a duplicate). Here
instead, each failure is sorted by whether the call *surely did not land*:

* 429 (with ``Retry-After``) and a refused connection: it did not land; wait and retry.
* 5xx, a timeout, a cut connection: it may have landed. Idempotent calls (``chat.update``,
  reads) are retried with backoff; a post is not: :class:`SlackUncertain` goes up, and the
  messenger looks for its own message (by metadata) before posting again.
* Any other ``ok: false`` (``channel_not_found``, ``invalid_auth``): :class:`SlackRefused`;
  retrying would not help.

Errors (a branch of :class:`~daemon.approvals.errors.ApprovalError`)::

    SlackCallFailed      a Web API call did not succeed
    ├── SlackUncertain   it may or may not have taken effect
    ├── SlackDown        it did not, after every retry (Slack unreachable or rate limiting)
    └── SlackRefused     Slack answered no
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from daemon.approvals.errors import ApprovalError
from daemon.core.approval_settings import SlackSection
from daemon.core.backoff import Backoff

log = logging.getLogger(__name__)

METADATA_EVENT = "vllm_governor_proposal"
HISTORY_PAGE = 200
_DEFAULT_RETRY_AFTER_S = 1.0


class SlackCallFailed(ApprovalError):
    """A Web API call did not succeed."""

    def __init__(self, method: str, detail: str) -> None:
        super().__init__(f"Slack {method} failed: {detail}")
        self.method = method


class SlackUncertain(SlackCallFailed):
    """The call may have taken effect (5xx, timeout, cut connection): do not repeat a post."""


class SlackDown(SlackCallFailed):
    """The call surely did not take effect, and retries ran out."""


class SlackRefused(SlackCallFailed):
    """Slack answered ``ok: false`` for a reason retrying does not change."""


Call = Callable[[AsyncWebClient], Awaitable[Any]]


class SlackApi:
    """The bot's Web API calls; one client per call keeps no session (and no task) open."""

    def __init__(self, section: SlackSection, bot_token: str) -> None:
        self._section = section
        self._token = bot_token

    def client(self) -> AsyncWebClient:
        """A client for this call (its aiohttp session is opened and closed by the call)."""
        return AsyncWebClient(
            token=self._token,
            base_url=self._section.api_base_url,
            timeout=int(max(1.0, self._section.timeout_s)),
            retry_handlers=[],
        )

    async def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Post a message once (retried only when it surely did not land); returns its ts."""
        args: dict[str, Any] = {"channel": channel, "text": text}
        if blocks is not None:
            args["blocks"] = blocks
        if thread_ts is not None:
            args["thread_ts"] = thread_ts
        if metadata is not None:
            args["metadata"] = {"event_type": METADATA_EVENT, "event_payload": dict(metadata)}
        answer = await self._call("chat.postMessage", args, idempotent=False)
        return str(answer["ts"])

    async def update(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        """Edit a message (idempotent: retried on any transient failure)."""
        args = {"channel": channel, "ts": ts, "text": text, "blocks": blocks}
        await self._call("chat.update", args, idempotent=True)

    async def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        """A message only ``user`` sees (a refusal, details); not repeated when uncertain."""
        args: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if blocks is not None:
            args["blocks"] = blocks
        await self._call("chat.postEphemeral", args, idempotent=False)

    async def find_posted(self, channel: str, proposal_id: str) -> str | None:
        """The ts of the governor's message for ``proposal_id`` in the channel's recent history."""
        args = {"channel": channel, "limit": HISTORY_PAGE, "include_all_metadata": True}
        answer = await self._call("conversations.history", args, idempotent=True)
        for message in answer.get("messages") or []:
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if metadata.get("event_type") == METADATA_EVENT and payload.get("proposal") == (
                proposal_id
            ):
                return str(message["ts"])
        return None

    async def group_members(self, group: str) -> frozenset[str]:
        """The user ids in a user group."""
        args = {"usergroup": group}
        answer = await self._call("usergroups.users.list", args, idempotent=True)
        return frozenset(str(user) for user in answer.get("users") or [])

    async def _call(self, method: str, args: dict[str, Any], *, idempotent: bool) -> Any:
        backoff = Backoff(base_s=0.5, cap_s=self._section.retry_max_delay_s)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.client().api_call(method, json=args)
            except SlackApiError as exc:
                status = exc.response.status_code
                error = exc.response.get("error", "")
                if status == 429:
                    delay = _retry_after(exc.response.headers, self._section.retry_max_delay_s)
                    failure: SlackCallFailed = SlackDown(method, f"rate limited ({error})")
                elif status >= 500:
                    failure = SlackUncertain(method, f"HTTP {status} ({error})")
                    delay = backoff.next_delay()
                else:
                    raise SlackRefused(method, str(error) or f"HTTP {status}") from exc
            except aiohttp.ClientConnectorError as exc:
                failure, delay = SlackDown(method, f"unreachable ({exc})"), backoff.next_delay()
            except (TimeoutError, aiohttp.ClientError) as exc:
                detail = f"{type(exc).__name__}: {exc}".rstrip(": ")
                failure, delay = SlackUncertain(method, detail), backoff.next_delay()
            if isinstance(failure, SlackUncertain) and not idempotent:
                raise failure
            if attempt > self._section.max_retries:
                raise failure
            log.warning(
                "Slack call failed; retrying",
                extra={"method": method, "error": str(failure), "delay_s": round(delay, 2)},
            )
            await asyncio.sleep(delay)


def _retry_after(headers: Mapping[str, Any], cap_s: float) -> float:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return min(cap_s, max(0.0, float(value)))
            except (TypeError, ValueError):
                break
    return _DEFAULT_RETRY_AFTER_S
