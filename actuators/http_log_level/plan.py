"""A log-level change as the journal keeps it: a frozen, versioned plan, read back typed.

The plan is journaled before anything is sent; a governor that reconciles the change after a
crash reads it back through :meth:`LevelPlan.from_json`, so the revert path works on the same
typed plan as the forward one, never on a dictionary it hopes has the right keys. Its JSON has
the keys every reader of the journal knows (``knobs`` as ``{log_level: [old, new]}``, as a
vLLM plan has) and a ``version``; a plan from before versioning reads as version 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actuators.http_log_level.wire import level_request
from daemon.api import LOG_LEVEL_KNOB, ActuationError, ChangeRequest, HttpLogLevelTarget

PLAN_VERSION = 1
KIND = "http_log_level"


@dataclass(frozen=True, slots=True)
class LevelPlan:
    """What one change sends, and the level to go back to.

    Attributes:
        target: The service's name.
        policy: The policy that asked for it.
        old: The level in force before (the one a revert sets again).
        new: The level asked for.
        method: The HTTP method that sets it.
        url: Where the new level is sent.
        old_word: The service's word for ``old``.
        new_word: The service's word for ``new``.
        reason: One sentence for people.
        evidence: The signal values the policy read.
    """

    target: str
    policy: str
    old: float
    new: float
    method: str
    url: str
    old_word: str
    new_word: str
    reason: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def make(
        cls, target: HttpLogLevelTarget, request: ChangeRequest, old: float, new: float
    ) -> LevelPlan:
        """The plan of ``request`` on ``target``, from the level in force ``old``."""
        setting = level_request(target, new)
        return cls(
            target=target.name,
            policy=request.policy,
            old=old,
            new=new,
            method=setting.method,
            url=setting.url,
            old_word=level_request(target, old).word,
            new_word=setting.word,
            reason=request.reason,
            evidence=dict(request.evidence),
        )

    def as_json(self) -> dict[str, Any]:
        """The plan for the journal."""
        return {
            "version": PLAN_VERSION,
            "target": self.target,
            "policy": self.policy,
            "kind": KIND,
            "knobs": {LOG_LEVEL_KNOB: [self.old, self.new]},
            "method": self.method,
            "url": self.url,
            "old_word": self.old_word,
            "new_word": self.new_word,
            "reason": self.reason,
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LevelPlan:
        """The plan a journal entry holds (:meth:`as_json`), as the governor that wrote it meant it.

        Raises:
            ActuationError: the entry holds no plan this governor can read (a newer version,
                another kind's plan, or a body that is not a plan).
        """
        version = int(data.get("version", 1))  # plans journaled before versioning were 1
        if version > PLAN_VERSION:
            message = (
                f"a log-level plan of version {version}, newer than this governor's {PLAN_VERSION}"
            )
            raise ActuationError(message)
        if data.get("kind", KIND) != KIND:
            message = f"the journal entry holds a plan of kind {data.get('kind')!r}, not {KIND!r}"
            raise ActuationError(message)
        try:
            old, new = data["knobs"][LOG_LEVEL_KNOB]
            # The levels are what a reconciliation needs; the rest only tells people.
            return cls(
                target=str(data.get("target", "")),
                policy=str(data.get("policy", "")),
                old=float(old),
                new=float(new),
                method=str(data.get("method", "")),
                url=str(data.get("url", "")),
                old_word=str(data.get("old_word", "")),
                new_word=str(data.get("new_word", "")),
                reason=str(data.get("reason", "")),
                evidence=dict(data.get("evidence") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            message = f"the journal entry holds no log-level plan this governor can read: {exc!r}"
            raise ActuationError(message) from exc
