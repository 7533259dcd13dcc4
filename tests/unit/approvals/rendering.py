"""The documented examples of the proposal message, shared by the snapshot test and the docs."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from daemon.approvals.blocks import fallback_text, message_blocks
from daemon.approvals.records import ProposalRecord
from daemon.approvals.state_machine import applied, decide, verified
from tests.unit.approvals.examples import FRESH, RULES, click, record

DOCS = Path(__file__).resolve().parents[3] / "docs" / "approvals"
PROPOSAL_JSON = DOCS / "proposal-message.json"
DECIDED_JSON = DOCS / "decided-message.json"


def pending_example() -> ProposalRecord:
    """kv-thrash proposing fewer sequences on `main`, waiting for a person."""
    return record()


def decided_example() -> ProposalRecord:
    """The same proposal approved by Alice, applied, and verified."""
    pending = pending_example()
    approved = decide(pending, click(pending, after_s=95), FRESH, RULES).record
    assert approved.changed_at is not None
    done = applied(approved, approved.changed_at + timedelta(seconds=64), "vLLM back in 58 s")
    assert done.changed_at is not None
    return verified(
        done, done.changed_at + timedelta(minutes=5), "max_num_seqs is 192; TTFT p95 1.2 s"
    )


def message_json(target: ProposalRecord) -> str:
    """The ``chat.postMessage`` / ``chat.update`` arguments, as the docs show them."""
    message: dict[str, Any] = {"text": fallback_text(target), "blocks": message_blocks(target)}
    return json.dumps(message, indent=2, ensure_ascii=False) + "\n"
