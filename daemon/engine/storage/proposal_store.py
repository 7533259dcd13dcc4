"""Proposals, the clicks judged on them and their Slack messages, in the state database.

Tables (schema version in ``schema_versions``, component ``approvals``)::

    approval_proposals(id, instance, policy, state, created_at, expires_at, record JSON,
                       revision, dirty, slack_channel, slack_ts, post_attempts, replied JSON)
    approval_clicks(id, proposal, at, user, via, action, accepted, refusal, message)

Version 2 adds ``approval_proposals.rollout_group``: the fleet group whose rollout a group
change's approved proposal follows (NULL for any other proposal). Such a proposal is not run
by the approved-changes runner, nor settled from the journal after a restart: its record
follows the rollout in etcd (:mod:`daemon.engine.approvals.rollout_follower`).

A record is saved with compare-and-set on its ``revision``: two clicks judged against the same
revision cannot both be written, so a decision is single-use even if two paths raced. ``dirty``
says the Slack message does not show the latest revision yet; the Slack messenger clears it
(again only for the revision it showed). The message reference is written in two steps so
that a post is never repeated blindly: ``post_attempts`` is raised *before* each
``chat.postMessage``, the ``ts`` is stored after it. A row with attempts but no ``ts`` may have
a message in Slack already: the messenger looks for it before posting again.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.approvals.clicks import Click
from daemon.approvals.records import ProposalRecord, State
from daemon.engine.storage.proposal_json import dump_record, load_record
from daemon.engine.storage.state_db import Schema, connect, transaction

SCHEMA = Schema(
    "approvals",
    (
        """
CREATE TABLE IF NOT EXISTS approval_proposals (
    id TEXT PRIMARY KEY, instance TEXT NOT NULL, policy TEXT NOT NULL, state TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, record TEXT NOT NULL,
    revision INTEGER NOT NULL DEFAULT 1, dirty INTEGER NOT NULL DEFAULT 1,
    slack_channel TEXT, slack_ts TEXT, post_attempts INTEGER NOT NULL DEFAULT 0,
    replied TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS approval_proposals_by_state ON approval_proposals (state);
CREATE TABLE IF NOT EXISTS approval_clicks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, proposal TEXT NOT NULL, at REAL NOT NULL,
    user TEXT NOT NULL, via TEXT NOT NULL, action TEXT NOT NULL, accepted INTEGER NOT NULL,
    refusal TEXT, message TEXT NOT NULL
);
""",
        "ALTER TABLE approval_proposals ADD COLUMN rollout_group TEXT;",
    ),
)
_COLUMNS = "record, revision, dirty, slack_channel, slack_ts, post_attempts, replied, rollout_group"
_FOLLOWED = (State.APPROVED.value, State.ROLLING_OUT.value)


@dataclass(frozen=True, slots=True)
class StoredProposal:
    """A record as stored, with its revision and its Slack message.

    Attributes:
        record: The proposal and its fate.
        revision: Bumped by every save; a save names the revision it was made from.
        dirty: The Slack message does not show this revision yet.
        channel: The channel of its message, once posted.
        ts: The ``ts`` of its message, once posted.
        post_attempts: ``chat.postMessage`` calls started for it (a marker written before each).
        replied: Thread replies already posted, by state name.
        rollout_group: The fleet group whose rollout it follows (a group change approved).
    """

    record: ProposalRecord
    revision: int
    dirty: bool
    channel: str | None
    ts: str | None
    post_attempts: int
    replied: tuple[str, ...]
    rollout_group: str | None = None


class ProposalStore:
    """The approvals' tables in the governor's state database."""

    def __init__(self, path: Path) -> None:
        self._db = connect(path, SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def insert(self, record: ProposalRecord) -> StoredProposal:
        """Store a new proposal."""
        proposal = record.proposal
        with self._transaction():
            self._db.execute(
                "INSERT INTO approval_proposals (id, instance, policy, state, created_at,"
                " expires_at, record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    proposal.id,
                    proposal.instance,
                    proposal.policy,
                    record.state.value,
                    proposal.created_at.timestamp(),
                    proposal.expires_at.timestamp(),
                    dump_record(record),
                ),
            )
        stored = self.get(proposal.id)
        assert stored is not None
        return stored

    def get(self, proposal_id: str) -> StoredProposal | None:
        """One proposal by id."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM approval_proposals WHERE id = ?",  # noqa: S608 - constant columns
            (proposal_id,),
        ).fetchone()
        return None if row is None else _stored(row)

    def save(self, record: ProposalRecord, revision: int, *, dirty: bool = True) -> bool:
        """Write ``record`` if the stored one is still at ``revision``; False when it moved on.

        ``dirty``: the message must be edited to show it (not so for a refused click, which
        changes only the record's memory of clicks seen).
        """
        with self._transaction():
            cursor = self._db.execute(
                "UPDATE approval_proposals SET state = ?, record = ?, revision = revision + 1,"
                " dirty = MAX(dirty, ?) WHERE id = ? AND revision = ?",
                (record.state.value, dump_record(record), int(dirty), record.proposal.id, revision),
            )
        return cursor.rowcount == 1

    def pending(self) -> list[StoredProposal]:
        """Every pending proposal, oldest first."""
        return self._select("WHERE state = ? ORDER BY created_at", (State.PENDING.value,))

    def approved(self) -> list[StoredProposal]:
        """Proposals approved but not yet known to be applied or failed (no group change's)."""
        return self._select(
            "WHERE state = ? AND rollout_group IS NULL ORDER BY created_at",
            (State.APPROVED.value,),
        )

    def follow(self, proposal_id: str, group: str) -> None:
        """The approved proposal is a group change's: its record follows ``group``'s rollout."""
        with self._transaction():
            self._db.execute(
                "UPDATE approval_proposals SET rollout_group = ? WHERE id = ?",
                (group, proposal_id),
            )

    def following(self) -> list[StoredProposal]:
        """Group changes' proposals whose rollout has not ended yet, oldest first."""
        return self._select(
            "WHERE rollout_group IS NOT NULL AND state IN (?, ?) ORDER BY created_at", _FOLLOWED
        )

    def listing(self, decided: int = 20) -> list[StoredProposal]:
        """Pending proposals (oldest first), then the ``decided`` most recent others."""
        others = self._select(
            "WHERE state != ? ORDER BY created_at DESC LIMIT ?", (State.PENDING.value, decided)
        )
        return [*self.pending(), *others]

    def dirty(self) -> list[StoredProposal]:
        """Proposals whose Slack message is behind their record, oldest first."""
        return self._select("WHERE dirty = 1 ORDER BY created_at", ())

    def shown(self, proposal_id: str, revision: int) -> None:
        """The message shows ``revision``: clear ``dirty`` unless the record moved on since."""
        with self._transaction():
            self._db.execute(
                "UPDATE approval_proposals SET dirty = 0 WHERE id = ? AND revision = ?",
                (proposal_id, revision),
            )

    def posting(self, proposal_id: str) -> int:
        """Mark that a ``chat.postMessage`` is about to start; returns the attempts so far."""
        with self._transaction():
            self._db.execute(
                "UPDATE approval_proposals SET post_attempts = post_attempts + 1 WHERE id = ?",
                (proposal_id,),
            )
            row = self._db.execute(
                "SELECT post_attempts FROM approval_proposals WHERE id = ?", (proposal_id,)
            ).fetchone()
        return int(row[0])

    def posted(self, proposal_id: str, channel: str, ts: str) -> None:
        """Remember the proposal's message."""
        with self._transaction():
            self._db.execute(
                "UPDATE approval_proposals SET slack_channel = ?, slack_ts = ? WHERE id = ?",
                (channel, ts, proposal_id),
            )

    def replied(self, proposal_id: str, state: str) -> None:
        """Remember that the thread reply for ``state`` was posted (or given up)."""
        with self._transaction():
            row = self._db.execute(
                "SELECT replied FROM approval_proposals WHERE id = ?", (proposal_id,)
            ).fetchone()
            done = [*json.loads(row[0]), state]
            self._db.execute(
                "UPDATE approval_proposals SET replied = ? WHERE id = ?",
                (json.dumps(done), proposal_id),
            )

    def log_click(self, click: Click, *, accepted: bool, refusal: str | None, message: str) -> None:
        """Append a judged click to the audit log (accepted or not)."""
        with self._transaction():
            self._db.execute(
                "INSERT INTO approval_clicks (proposal, at, user, via, action, accepted, refusal,"
                " message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    click.proposal_id,
                    click.at.timestamp(),
                    click.user,
                    click.via,
                    click.action.value,
                    int(accepted),
                    refusal,
                    message,
                ),
            )

    def clicks(self, proposal_id: str) -> list[dict[str, Any]]:
        """The clicks judged on a proposal, oldest first."""
        rows = self._db.execute(
            "SELECT at, user, via, action, accepted, refusal, message FROM approval_clicks"
            " WHERE proposal = ? ORDER BY id",
            (proposal_id,),
        )
        return [
            {
                "at": datetime.fromtimestamp(at, UTC).isoformat(),
                "user": user,
                "via": via,
                "action": action,
                "accepted": bool(accepted),
                "refusal": refusal,
                "message": message,
            }
            for at, user, via, action, accepted, refusal, message in rows
        ]

    def _select(self, where: str, args: tuple[Any, ...]) -> list[StoredProposal]:
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM approval_proposals {where}", args)  # noqa: S608 - constant SQL
        return [_stored(row) for row in rows]

    def _transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)


def _stored(row: tuple[Any, ...]) -> StoredProposal:
    record, revision, dirty, channel, ts, attempts, replied, rollout_group = row
    return StoredProposal(
        record=load_record(record),
        revision=int(revision),
        dirty=bool(dirty),
        channel=channel,
        ts=ts,
        post_attempts=int(attempts),
        replied=tuple(json.loads(replied)),
        rollout_group=rollout_group,
    )
