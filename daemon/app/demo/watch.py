"""The demo's watch loop: what changed becomes an event, proposals get answers, the view redraws.

It runs in the main thread, twice a second, on what the sampler thread last saw: a terminal
prompt blocks it (not the sampler). A child that died ends the demo with an error naming it.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from daemon.app.demo.approver import Approver, describe
from daemon.app.demo.children import Children, DemoError
from daemon.app.demo.sampler import Sampler
from daemon.app.demo.scenario import STARTING_MAX_NUM_BATCHED_TOKENS, TUNED_OPTION
from daemon.app.demo.view import Frame, View, action_line, offered_load

TICK_S = 0.5


class Watch:
    """The watch loop and the events it tells."""

    def __init__(
        self,
        *,
        duration_s: float,
        approve: str,
        origin: float,
        arrival_times: list[float],
        sampler: Sampler,
        approver: Approver,
        view: View,
        children: Children,
    ) -> None:
        self._duration_s = duration_s
        self._approve = approve
        self._origin = origin
        self._arrivals = arrival_times
        self._sampler = sampler
        self._approver = approver
        self._view = view
        self._children = children
        self._seen_proposals: set[str] = set()
        self._actions: dict[Any, str] = {}
        self._serving: int | None = STARTING_MAX_NUM_BATCHED_TOKENS
        self.notify: socket.socket | None = None

    def loop(self) -> None:
        """Watch until the duration has passed."""
        end = self._origin + self._duration_s
        while (now := time.time()) < end:
            self.tick(now - self._origin)
            time.sleep(max(0.0, min(TICK_S, end - time.time())))
        self.tick(time.time() - self._origin)

    def tick(self, t: float) -> None:
        """One turn: check the children, tell what changed, answer, redraw."""
        self._drain_notifications()
        for child in self._children.started:
            if not child.alive():
                message = f"{child.name} exited with status {child.process.returncode}"
                raise DemoError(message)
        observed = self._sampler.observed
        with observed.lock:
            sample = observed.samples[-1] if observed.samples else None
            proposals = list(observed.proposals)
            actuations = list(observed.actuations)
        self._tell(t, proposals, actuations, sample.knob if sample else None)
        for answer in self._approver.handle(proposals, t):
            verb = "approved" if answer.action == "approve" else "rejected"
            taken = "" if answer.accepted else f" (not accepted: {answer.reason})"
            self._view.event(t, f"{verb} {describe(answer.proposal)}{taken} -> {answer.state}")
        load = offered_load(self._arrivals, max(0.0, t))
        frame = Frame(
            t=max(0.0, t),
            total_s=self._duration_s,
            sample=sample,
            arrivals_per_s=load,
            proposals=proposals,
            actuations=actuations,
            approve=self._approve,
        )
        self._view.show(frame)

    def _drain_notifications(self) -> None:
        """Read what the daemon told its 'systemd' (READY, STATUS, WATCHDOG...)."""
        if self.notify is None:
            return
        self.notify.setblocking(False)
        try:
            while self.notify.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _tell(
        self, t: float, proposals: list[dict[str, Any]], actions: list[dict[str, Any]], knob: Any
    ) -> None:
        for proposal in proposals:
            key = str(proposal.get("id"))
            if key not in self._seen_proposals:
                self._seen_proposals.add(key)
                self._view.event(t, f"proposal {key}: {describe(proposal)}")
        for action in actions:
            text = action_line(action)
            if self._actions.get(action.get("id")) != text:
                self._actions[action.get("id")] = text
                self._view.event(t, f"change {text}")
        if knob != self._serving:
            what = "the server is down" if knob is None else f"serving with {TUNED_OPTION} {knob}"
            self._view.event(t, what)
            self._serving = knob
