"""The Slack messenger: makes each proposal's message show what the store says, once.

The store is the truth and marks a proposal ``dirty`` when its message is behind. The
messenger wakes on a change (or every few seconds) and, for each dirty proposal:

* no message yet, still pending: post it, unless an earlier attempt may have posted already
  (``post_attempts`` > 0), in which case the channel is searched for the message carrying
  the proposal's id in its metadata first. So a restart or a lost answer never posts twice;
* a message: edit it (``chat.update`` is idempotent, so it is retried freely);
* a state reached after approval (applied, verified, reverted, failed): one reply in the
  message's thread. A reply whose fate is uncertain is not repeated (at most once: the edited
  message carries the outcome anyway).

A proposal that closed before it could ever be posted (Slack was down until it expired) is not
posted late. Any Slack failure ends the round; the next one retries, with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from daemon.approvals.blocks import fallback_text, message_blocks, thread_text
from daemon.approvals.records import ProposalRecord, State
from daemon.core.backoff import Backoff
from daemon.engine.approvals.slack.slack_api import SlackApi, SlackCallFailed, SlackUncertain
from daemon.engine.storage.proposal_store import ProposalStore, StoredProposal

log = logging.getLogger(__name__)

IDLE_S = 5.0
THREAD_STATES = frozenset({State.APPLIED, State.VERIFIED, State.REVERTED, State.FAILED})


class Needed(Protocol):
    """Tells how many approvers a proposal needs (for the message's context line)."""

    def approvals_needed(self, record: ProposalRecord) -> int:
        """How many approvers ``record``'s proposal needs."""
        ...


class Messenger:
    """Mirrors proposals into Slack messages."""

    def __init__(
        self,
        api: SlackApi,
        store: ProposalStore,
        changed: asyncio.Event,
        channel: str,
        rules: Needed,
    ) -> None:
        self._api = api
        self._store = store
        self._changed = changed
        self._channel = channel
        self._rules = rules

    async def run(self) -> None:
        """Sync forever; raise only on a bug (the caller restarts it with backoff)."""
        backoff = Backoff(base_s=1.0, cap_s=60.0)
        while True:
            self._changed.clear()
            try:
                await self.sync_all()
            except SlackCallFailed as exc:
                delay = backoff.next_delay()
                log.warning(
                    "Slack is not taking messages; will retry",
                    extra={"error": str(exc), "delay_s": round(delay, 2)},
                )
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), IDLE_S)

    async def sync_all(self) -> None:
        """Bring every dirty proposal's message up to date."""
        for stored in self._store.dirty():
            await self.sync(stored)

    async def sync(self, stored: StoredProposal) -> None:
        """Bring one proposal's message up to date (see the module docstring)."""
        record = stored.record
        proposal_id = record.proposal.id
        channel, ts = stored.channel or self._channel, stored.ts
        text = fallback_text(record)
        blocks = message_blocks(record, self._rules.approvals_needed(record))
        if ts is None and not record.open:
            self._store.shown(proposal_id, stored.revision)  # too late to ask anyone
            return
        if ts is None and stored.post_attempts > 0:
            ts = await self._api.find_posted(channel, proposal_id)
            if ts is not None:
                self._store.posted(proposal_id, channel, ts)
                log.info("found the message of an earlier attempt", extra={"proposal": proposal_id})
        if ts is None:
            self._store.posting(proposal_id)
            ts = await self._api.post(channel, text, blocks, metadata={"proposal": proposal_id})
            self._store.posted(proposal_id, channel, ts)
            log.info("proposal posted to Slack", extra={"proposal": proposal_id, "ts": ts})
        else:
            await self._api.update(channel, ts, text, blocks)
        if record.state in THREAD_STATES and record.state.value not in stored.replied:
            try:
                await self._api.post(channel, thread_text(record), thread_ts=ts)
            except SlackUncertain as exc:
                log.warning("thread reply may be lost; not repeated", extra={"error": str(exc)})
            self._store.replied(proposal_id, record.state.value)
        self._store.shown(proposal_id, stored.revision)
