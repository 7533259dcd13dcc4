"""Which of the allow-listed Slack user groups a clicker belongs to, asked of Slack.

A click's payload never says which groups its user is in, and the governor would not trust it
if it did: membership is read with ``usergroups.users.list`` and kept for ``group_cache_s``.
A group that cannot be read (Slack down, a wrong id) counts as one the user is *not* in: the
check fails closed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from daemon.core.clock import Clock
from daemon.engine.approvals.slack.slack_api import SlackApi, SlackCallFailed

log = logging.getLogger(__name__)


class SlackGroups:
    """Group membership, cached per group."""

    def __init__(self, api: SlackApi, ttl_s: float, clock: Clock) -> None:
        self._api = api
        self._ttl_s = ttl_s
        self._clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    async def of(self, user: str, groups: Iterable[str]) -> frozenset[str]:
        """The groups among ``groups`` (Slack ids, ``S…``) that ``user`` is a member of."""
        found = set()
        for group in groups:
            if not group.startswith("S"):
                continue  # unix-group:NAME is for CLI users
            members = await self._read(group)
            if user in members:
                found.add(group)
        return frozenset(found)

    async def _read(self, group: str) -> frozenset[str]:
        now = self._clock.monotonic()
        cached = self._members.get(group)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        try:
            members = await self._api.group_members(group)
        except SlackCallFailed as exc:
            log.warning("user group not read: its members count as none", extra={"error": str(exc)})
            return frozenset()
        self._members[group] = (now, members)
        return members
