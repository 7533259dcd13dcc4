"""The evidence line of ``proposals`` (and the demo's question) rounds what it read.

Issue 19, finding 9: the demo showed ``queue_p95_s=4.392405063291138``.
"""

from __future__ import annotations

from dataclasses import replace

from daemon.approvals.proposal import from_decision
from daemon.approvals.records import ProposalRecord
from daemon.engine.approvals.approval_json import why_text
from daemon.policy.decisions import Evidence
from tests.unit.approvals.examples import CONDITION, T0, TTL_S, decision


def test_signal_values_are_rounded_as_people_read_them() -> None:
    read = Evidence(CONDITION, {"queue_p95_s": 4.392405063291138, "preemptions_per_s": None}, 190)
    made = from_decision(replace(decision(), evidence=read), host="h", created_at=T0, ttl_s=TTL_S)
    assert why_text(ProposalRecord(made)) == (
        f"{CONDITION} held for 3 min 10 s [preemptions_per_s=no data, queue_p95_s=4.392]"
    )
