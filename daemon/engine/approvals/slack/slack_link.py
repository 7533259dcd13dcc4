"""The approvals' link to Slack: which tasks run, with which tokens, and plain notifications.

Slack is optional. It is used when ``[slack] enabled`` is true, a channel is set and the bot
token is among the secrets; the transport then needs its own secret (the app-level token for
Socket Mode, the signing secret for HTTP). A missing piece is logged once, plainly, and the
approvals carry on with the CLI only: a daemon without Slack still governs.

Every Slack task is guarded: it logs a failure, backs off and tries again, and never ends, so
Slack being down can never stop the daemon (automatic changes go on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from daemon.core.approval_settings import SlackSection
from daemon.core.backoff import Backoff
from daemon.core.clock import Clock
from daemon.core.secrets import GovernorSecrets, secret_hint
from daemon.engine.approvals.approval_desk import ApprovalDesk
from daemon.engine.approvals.slack.slack_api import SlackApi, SlackCallFailed
from daemon.engine.approvals.slack.slack_groups import SlackGroups
from daemon.engine.approvals.slack.slack_http import serve_interactivity
from daemon.engine.approvals.slack.slack_interactions import Interactions
from daemon.engine.approvals.slack.slack_messenger import Messenger
from daemon.engine.approvals.slack.slack_socket_mode import run_socket_mode
from daemon.engine.runtime.supervisor import EternalTask, Readiness

log = logging.getLogger(__name__)

Payload = tuple[str, dict[str, Any]]


class SlackLink:
    """The Slack side of the approvals: the messenger, a transport, the interaction handler."""

    def __init__(
        self,
        section: SlackSection,
        api: SlackApi,
        plane: ApprovalDesk,
        clock: Clock,
        transport_secret: str,
    ) -> None:
        self.section = section
        self.api = api
        self._secret = transport_secret
        self._clock = clock
        self.inbox: asyncio.Queue[Payload] = asyncio.Queue()
        self.http_port: int | None = None  # the interactivity endpoint's, once it listens
        self.messenger = Messenger(api, plane.store, plane.changed, section.channel, plane)
        self.interactions = Interactions(
            api, plane, SlackGroups(api, section.group_cache_s, clock), clock
        )

    @classmethod
    def configure(
        cls,
        section: SlackSection,
        secrets: GovernorSecrets | None,
        plane: ApprovalDesk,
        clock: Clock,
    ) -> SlackLink | None:
        """The link, or None (logged) when Slack is off or a secret it needs is missing."""
        if not section.enabled:
            return None
        needed = "slack_app_token" if section.transport == "socket_mode" else "slack_signing_secret"
        missing = [
            name
            for name in ("slack_bot_token", needed)
            if secrets is None or getattr(secrets, name) is None
        ]
        if not section.channel:
            log.error("Slack is enabled but [slack] channel is empty: approvals by CLI only")
            return None
        if missing or secrets is None:
            for name in missing:
                log.error(
                    "Slack is enabled but a secret is missing: approvals by CLI only",
                    extra={"secret": name, "hint": secret_hint(name)},
                )
            return None
        bot = secrets.slack_bot_token
        transport = getattr(secrets, needed)
        assert bot is not None
        assert transport is not None
        api = SlackApi(section, bot.get_secret_value())
        return cls(section, api, plane, clock, transport.get_secret_value())

    def tasks(self) -> list[EternalTask]:
        """The messenger, the transport and the interaction handler, each guarded."""
        transport: Callable[[], Awaitable[None]]
        if self.section.transport == "socket_mode":
            name = "slack socket mode"

            def transport() -> Awaitable[None]:
                return run_socket_mode(self.section, self.api, self._secret, self.inbox)

        else:
            name = "slack interactivity endpoint"

            def transport() -> Awaitable[None]:
                return serve_interactivity(
                    self.section, self._secret, self._clock, self.inbox, self._listening
                )

        return [
            EternalTask("slack messenger", _guarded("slack messenger", self.messenger.run)),
            EternalTask(name, _guarded(name, transport)),
            EternalTask("approval listener", self._listen),
        ]

    async def notify(self, text: str, target: str = "") -> bool:
        """A plain message in the channel; False (logged) when Slack did not take it."""
        shown = f"*{target}*: {text}" if target else text
        try:
            await self.api.post(self.section.channel, shown)
        except SlackCallFailed as exc:
            log.warning("notification not sent", extra={"error": str(exc), "target": target})
            return False
        return True

    def _listening(self, port: int) -> None:
        self.http_port = port

    async def _listen(self, readiness: Readiness) -> None:
        """Handle what the transport received, each interaction in a task of its own."""
        readiness.started()
        async with asyncio.TaskGroup() as group:
            while True:
                kind, payload = await self.inbox.get()
                group.create_task(self.interactions.guarded(kind, payload), name=f"slack {kind}")


def _guarded(
    name: str, body: Callable[[], Awaitable[None]]
) -> Callable[[Readiness], Awaitable[None]]:
    """An eternal task that is ready at once and restarts ``body`` with backoff when it fails."""

    async def run(readiness: Readiness) -> None:
        readiness.started()
        backoff = Backoff(base_s=1.0, cap_s=60.0)
        while True:
            try:
                await body()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Slack task failed; retrying", extra={"task": name})
            else:
                log.warning("Slack task ended; restarting it", extra={"task": name})
            await asyncio.sleep(backoff.next_delay())

    return run
