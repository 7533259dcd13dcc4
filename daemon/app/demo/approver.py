"""The demo's approver: each pending proposal answered once, in the terminal or automatically.

The answer goes over the control socket (``approve`` / ``reject``) like ``vllm-governor
approve`` would send it: the daemon judges it as the local user ``unix:NAME`` against the
allow-list of the demo's config.toml, re-checks the proposal at that moment, and only then
runs the change through the actuator's usual checks. The proposal's hash travels with the
answer, so that a person never approves a change other than the one shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from daemon.app.control_client import call_daemon
from daemon.core.errors import ControlError

Mode = Literal["terminal", "auto", "deny"]
# Asks a person about one proposal: True to approve, False to reject, None while they have not
# answered yet (the proposal is asked about again on the next turn; nothing blocks meanwhile).
Ask = Callable[[dict[str, Any]], bool | None]
DENY_REASON = "the demo runs with --approve deny"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the demo answered to one proposal, and what the daemon made of it.

    Attributes:
        t: Seconds after the workload's time 0 at which the answer was given.
        proposal: The proposal as the daemon listed it.
        action: ``approve`` or ``reject``.
        accepted: Whether the daemon took the answer.
        state: The proposal's state after it (``approved``, ``rejected``...).
        reason: The daemon's message.
    """

    t: float
    proposal: dict[str, Any]
    action: str
    accepted: bool
    state: str
    reason: str


def describe(proposal: dict[str, Any]) -> str:
    """One line: policy, target and each knob's move."""
    moves = ", ".join(
        f"{knob} {change['old']:g} -> {change['new']:g}"
        for knob, change in proposal.get("changes", {}).items()
    )
    what = moves or str(proposal.get("operation") or "no change")
    return f"{proposal.get('policy')} on {proposal.get('target')}: {what}"


class Approver:
    """Answers pending proposals.

    Args:
        control_socket: The daemon's control socket.
        mode: ``terminal`` (ask), ``auto`` (approve) or ``deny`` (reject).
        ask: How to ask a person (``terminal`` mode only).
    """

    def __init__(self, control_socket: Path, mode: Mode, ask: Ask | None = None) -> None:
        if mode == "terminal" and ask is None:
            message = "terminal approvals need a way to ask"
            raise ValueError(message)
        self._socket = control_socket
        self._mode = mode
        self._ask = ask
        self._answered: set[str] = set()
        self.answers: list[Answer] = []

    def handle(self, proposals: list[dict[str, Any]], t: float) -> list[Answer]:
        """Answer every pending proposal not answered yet; the new answers."""
        new = []
        for proposal in proposals:
            proposal_id = str(proposal.get("id"))
            if proposal.get("state") != "pending" or proposal_id in self._answered:
                continue
            approve = self._decide(proposal)
            if approve is None:
                continue
            self._answered.add(proposal_id)
            new.append(self._send(proposal, approve, t))
        self.answers.extend(new)
        return new

    def _decide(self, proposal: dict[str, Any]) -> bool | None:
        if self._mode == "auto":
            return True
        if self._mode == "deny":
            return False
        assert self._ask is not None
        return self._ask(proposal)

    def _send(self, proposal: dict[str, Any], approve: bool, t: float) -> Answer:
        action = "approve" if approve else "reject"
        args: dict[str, Any] = {"id": proposal["id"]}
        if proposal.get("hash"):
            args["hash"] = proposal["hash"]
        if not approve:
            args["reason"] = DENY_REASON if self._mode == "deny" else "rejected in the demo"
        try:
            reply = call_daemon(self._socket, action, **args)
        except ControlError as exc:
            return Answer(t, proposal, action, False, str(proposal.get("state")), str(exc))
        return Answer(
            t,
            proposal,
            action,
            bool(reply.get("accepted")),
            str(reply.get("state")),
            str(reply.get("reason", "")),
        )
