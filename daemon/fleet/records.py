"""What the fleet writes to etcd: a registered instance, a freeze. JSON, versioned.

Each record is a frozen dataclass with ``to_json`` and ``from_json``; a reader meets records
written by other governors, perhaps of another version, so an unknown field is ignored and a
missing or malformed one makes the record unreadable (:class:`RecordError`), never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemon.fleet.errors import FleetError

VERSION = 1


class RecordError(FleetError):
    """A record in etcd that cannot be read (not JSON, or a field missing or of a wrong type)."""


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """One vLLM instance as its governor registered it.

    Attributes:
        host: The governor's name in the fleet.
        instance: The instance's name on that host.
        group: The group of replicas it belongs to.
        vllm_version: What its ``/version`` said last ("" while not known).
        knobs: The knob values its files set now.
        health: ``up``, ``down`` or ``unknown``, from the governor's own scrapes.
        since: When the governor registered (ISO 8601), this lease's life.
    """

    host: str
    instance: str
    group: str
    vllm_version: str
    knobs: Mapping[str, float] = field(default_factory=dict)
    health: str = "unknown"
    since: str = ""

    def to_json(self) -> bytes:
        """The record as etcd stores it."""
        body = {
            "v": VERSION,
            "host": self.host,
            "instance": self.instance,
            "group": self.group,
            "vllm_version": self.vllm_version,
            "knobs": dict(sorted(self.knobs.items())),
            "health": self.health,
            "since": self.since,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> MemberRecord:
        """A record read back.

        Raises:
            RecordError: not a member record this version can read.
        """
        data = _object(raw)
        try:
            knobs = {str(k): float(v) for k, v in dict(data.get("knobs", {})).items()}
            return cls(
                host=_text(data, "host"),
                instance=_text(data, "instance"),
                group=_text(data, "group"),
                vllm_version=str(data.get("vllm_version", "")),
                knobs=knobs,
                health=str(data.get("health", "unknown")),
                since=str(data.get("since", "")),
            )
        except (TypeError, ValueError) as exc:
            message = f"a member record cannot be read: {exc}"
            raise RecordError(message) from exc

    def as_json(self) -> dict[str, Any]:
        """The record as ``fleet status --json`` prints it."""
        loaded: dict[str, Any] = json.loads(self.to_json())
        del loaded["v"]
        return loaded


@dataclass(frozen=True, slots=True)
class FreezeRecord:
    """A fleet freeze: of every governor, or of one group.

    Attributes:
        group: The group frozen, or None for the whole fleet.
        until: When it ends by itself (with a time zone).
        reason: Why, as people gave it.
        by: Who froze.
    """

    group: str | None
    until: datetime
    reason: str
    by: str

    def to_json(self) -> bytes:
        """The record as etcd stores it."""
        body = {
            "v": VERSION,
            "group": self.group,
            "until": self.until.isoformat(),
            "reason": self.reason,
            "by": self.by,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> FreezeRecord:
        """A freeze read back.

        Raises:
            RecordError: not a freeze this version can read.
        """
        data = _object(raw)
        try:
            until = datetime.fromisoformat(_text(data, "until"))
        except ValueError as exc:
            message = f"a fleet freeze has an unreadable expiry: {exc}"
            raise RecordError(message) from exc
        if until.tzinfo is None:
            message = "a fleet freeze's expiry has no time zone"
            raise RecordError(message)
        group = data.get("group")
        return cls(
            group=None if group is None else str(group),
            until=until,
            reason=str(data.get("reason", "")),
            by=str(data.get("by", "")),
        )

    def in_force(self, now: datetime) -> bool:
        """Whether the freeze still counts at ``now``."""
        return now < self.until

    def covers(self, group: str) -> bool:
        """Whether the freeze holds changes of an instance of ``group``."""
        return self.group is None or self.group == group

    def describe(self) -> str:
        """The freeze in words, for a refusal and for ``fleet status``."""
        scope = "the fleet" if self.group is None else f"group {self.group}"
        by = f" (by {self.by})" if self.by else ""
        return f"fleet freeze of {scope} until {self.until.isoformat()}: {self.reason}{by}"

    def as_json(self) -> dict[str, Any]:
        """The freeze as ``fleet status --json`` prints it."""
        return {
            "group": self.group,
            "until": self.until.isoformat(),
            "reason": self.reason,
            "by": self.by,
        }


def _object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        message = "a fleet record is not JSON"
        raise RecordError(message) from exc
    if not isinstance(data, dict):
        message = "a fleet record is not a JSON object"
        raise RecordError(message)
    return data


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        message = f"a fleet record lacks {name!r}"
        raise RecordError(message)
    return value
