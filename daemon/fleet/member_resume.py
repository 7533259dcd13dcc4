"""Whether a member acts on what a rollout asks, or finds it already done (pure).

A member's governor answers each step a rollout asks of one of its servers once. It may die
between acting and answering (the change made, the report not yet written), or its report
may be lost with etcd; asked again, it must not make the same change a second time: a second
restart of a server that already took the change, or worse, of one whose verification just
rejected it. So before acting it writes an :class:`Attempt` (the rollout's per-member record
in etcd, bound to no lease: it outlives the governor), and every time it is asked it first
decides with :func:`resume` from three facts:

* the attempt begun for this step, if any (when, and the values before it);
* the server's :class:`Standing`: its knob values as its files say (what the actuator
  reads), whether a change of it is open in the journal, and the last change of it for the
  rollout's policy that finished since the attempt began;
* the values the step asks for.

======================================  =========================================  =========
found                                   answer                                     restarts
======================================  =========================================  =========
a change of the server open             wait: it is under way or being reconciled  0
the attempt's change finished: done     done, with the attempt's values before     0
... reverted, failed, refused           failed, with the journal's outcome         0
the files already say the values        done (nothing to change), values before    0
                                        the attempt's, else the files'
anything else                           act (the first time for this step)         1
======================================  =========================================  =========

A change that was abandoned (the files put back before any restart) counts as not made: the
step is acted on again, which restarts the server once, for the first time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from daemon.core.actuation import ABANDONED, DONE, JournalState
from daemon.fleet.rollout_state import RolloutMoveError, Step


@dataclass(frozen=True, slots=True)
class Attempt:
    """A member's governor began a step of a rollout (written before it acts).

    Attributes:
        member: ``HOST/INSTANCE``.
        asked: The step begun (APPLY or REVERT).
        values: The knob values the step sets.
        previous: The knob values the server's files set before.
        at: When it began (wall clock): the journal's changes since belong to it.
    """

    member: str
    asked: Step
    values: Mapping[str, float]
    previous: Mapping[str, float]
    at: datetime

    def to_json(self) -> bytes:
        """The attempt as stored in etcd."""
        body: dict[str, Any] = {"member": self.member, "asked": self.asked.value}
        body |= {"values": dict(self.values), "previous": dict(self.previous)}
        body["at"] = self.at.isoformat()
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Attempt:
        """A stored attempt.

        Raises:
            RolloutMoveError: not an attempt this version wrote.
        """
        try:
            data = json.loads(raw)
            return cls(
                str(data["member"]),
                Step(data["asked"]),
                {str(k): float(v) for k, v in data["values"].items()},
                {str(k): float(v) for k, v in data["previous"].items()},
                datetime.fromisoformat(data["at"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            message = f"a member's attempt that cannot be read: {exc}"
            raise RolloutMoveError(message) from exc


@dataclass(frozen=True, slots=True)
class FinishedChange:
    """A change of the server that the journal holds as finished.

    Attributes:
        state: How it ended.
        outcome: The journal's sentence.
    """

    state: JournalState
    outcome: str


@dataclass(frozen=True, slots=True)
class Standing:
    """What the member's governor knows of its server before it answers a step.

    Attributes:
        knobs: The knob values its files set now (empty when unknown).
        open_change: A change of the server is open in the journal: under way, or left by a
            governor that died and not finished yet (the reconcile).
        finished: The last change of the server for the rollout's policy that finished
            since the attempt began (None without an attempt, or when none did).
    """

    knobs: Mapping[str, float] = field(default_factory=dict)
    open_change: bool = False
    finished: FinishedChange | None = None


class Answer(Enum):
    """What the member does about a step."""

    WAIT = "wait"  # look again later
    ACT = "act"  # make the change (the first time for this step)
    DONE = "done"  # report it done, nothing restarted
    FAILED = "failed"  # report it failed, nothing restarted


@dataclass(frozen=True, slots=True)
class Resumption:
    """The decision of :func:`resume`.

    Attributes:
        answer: What to do.
        detail: Why, in words (a report's detail for DONE and FAILED).
        previous: The values the server ran before the step (DONE and FAILED).
    """

    answer: Answer
    detail: str = ""
    previous: Mapping[str, float] = field(default_factory=dict)


def resume(
    asked: Step, values: Mapping[str, float], attempt: Attempt | None, standing: Standing
) -> Resumption:
    """Whether to act on the step ``asked`` (setting ``values``), or what it came to (see above).

    ``attempt`` is the member's record in etcd, if one was written for this step.
    """
    if standing.open_change:
        return Resumption(Answer.WAIT, "a change of the server is open in the journal")
    began = attempt is not None and attempt.asked is asked
    before = dict(attempt.previous) if attempt is not None and began else {}
    finished = standing.finished if began else None
    if finished is not None and finished.state is not ABANDONED:
        detail = f"{finished.state}: {finished.outcome} (before the governor restarted)"
        answer = Answer.DONE if finished.state is DONE else Answer.FAILED
        return Resumption(answer, detail, before)
    if values and all(standing.knobs.get(knob) == value for knob, value in values.items()):
        already = {knob: standing.knobs[knob] for knob in values}
        detail = "already in force (the files say so): nothing restarted"
        return Resumption(Answer.DONE, detail, before or already)
    return Resumption(Answer.ACT)
