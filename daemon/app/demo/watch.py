"""The demo's watch loop: what changed becomes an event, proposals get answers, the view redraws.

It runs in the main thread, twice a second, on what the sampler thread last saw. Nothing
blocks it: a question is answered by one key, read on each turn, so the panel goes on
updating while it asks. A child that died ends the demo with an error naming it.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from daemon.app.demo.approver import Approver, describe
from daemon.app.demo.children import Children, DemoError
from daemon.app.demo.first_tokens import WINDOW_S, attainment_lines, share_within
from daemon.app.demo.keys import KeyAsker
from daemon.app.demo.narration import (
    Waiting,
    answer_line,
    change_line,
    forecast_line,
    realised_line,
    restart_cost,
    waiting_lines,
)
from daemon.app.demo.sampler import Sample, Sampler
from daemon.app.demo.scenario import STARTING_MAX_NUM_BATCHED_TOKENS, TTFT_SLO_S, TUNED_OPTION
from daemon.app.demo.view import Frame, View, offered_load
from daemon.core.actuation import OPEN

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
        asker: KeyAsker | None = None,
    ) -> None:
        self._duration_s = duration_s
        self._approve = approve
        self._origin = origin
        self._arrivals = arrival_times
        self._sampler = sampler
        self._approver = approver
        self._view = view
        self._children = children
        self._asker = asker
        self._seen_proposals: set[str] = set()
        self._told_realised = 0
        self._actions: dict[Any, str] = {}
        self._serving: int | None = STARTING_MAX_NUM_BATCHED_TOKENS
        self._waiting: set[tuple[str, str, str]] = set()
        self._asked: str | None = None
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
            samples = list(observed.samples)
            proposals = list(observed.proposals)
            actuations = list(observed.actuations)
            policies = list(observed.policies)
            realised = list(observed.realised)
        sample = samples[-1] if samples else None
        for decision in realised[self._told_realised :]:
            self._view.event(t, realised_line(decision))
        self._told_realised = len(realised)
        waiting = waiting_lines(policies, self._origin, t, end=self._duration_s)
        self._tell(t, proposals, actuations, sample, waiting)
        pending = {str(p.get("id")): p for p in proposals if p.get("state") == "pending"}
        if self._asker is not None:
            self._asker.still_pending(set(pending))
        for answer in self._approver.handle(proposals, t):
            change = describe(answer.proposal)
            self._view.event(
                t,
                answer_line(
                    change,
                    action=answer.action,
                    mode=self._approve,
                    accepted=answer.accepted,
                    reason=answer.reason,
                ),
            )
        asking = self._asking(t)
        self._view.show(
            Frame(
                t=max(0.0, t),
                total_s=self._duration_s,
                sample=sample,
                arrivals_per_s=offered_load(self._arrivals, max(0.0, t)),
                actuations=actuations,
                approve=self._approve,
                waiting=[item.line for item in waiting],
                asking=asking,
                proposals=[
                    describe(p)
                    for key, p in pending.items()
                    if asking is None or key != str(asking.get("id"))
                ],
                slo=slo_lines(samples, t),
                slo_now=share_within([(s.t, s.first_tokens) for s in samples], t - WINDOW_S, t),
                costs=cost_lines(actuations),
            )
        )

    def _asking(self, t: float) -> dict[str, Any] | None:
        """The proposal asked about now; an event the first time it is asked."""
        asking = None if self._asker is None else self._asker.asking
        key = None if asking is None else str(asking.get("id"))
        if asking is not None and key != self._asked:
            self._view.event(t, f"the governor asks you: {describe(asking)}: approve? (y/n)")
        self._asked = key
        return asking

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
        self,
        t: float,
        proposals: list[dict[str, Any]],
        actions: list[dict[str, Any]],
        sample: Sample | None,
        waiting: list[Waiting],
    ) -> None:
        for item in waiting:
            if item.key not in self._waiting:  # told once, when it starts, not each turn
                self._view.event(t, item.line)
        self._waiting = {item.key for item in waiting}
        for proposal in proposals:
            key = str(proposal.get("id"))
            if key not in self._seen_proposals:
                self._seen_proposals.add(key)
                self._view.event(t, f"proposal {key}: {describe(proposal)}")
                if prediction := forecast_line(proposal):
                    self._view.event(t, prediction)
        for action in actions:
            text = change_line(action)
            if self._actions.get(action.get("id")) != text:
                self._actions[action.get("id")] = text
                self._view.event(t, text)
                if action.get("state") != OPEN and (
                    cost := restart_cost(action.get("timings") or {})
                ):
                    self._view.event(t, cost)
        if sample is None:
            return  # nothing seen yet: the server is not known to be down
        if sample.knob != self._serving:
            if sample.knob is None:
                what = "the server is down (restarting): arrivals now are missed"
            else:
                what = f"the server serves again, with {TUNED_OPTION} {sample.knob}"
            self._view.event(t, what)
            self._serving = sample.knob


def slo_lines(samples: list[Sample], t: float) -> list[str]:
    """SLO attainment as the live view tells it, from the samples' first tokens."""
    series = [(s.t, s.knob, s.first_tokens) for s in samples]
    return attainment_lines(series, t, slo_s=TTFT_SLO_S, option=TUNED_OPTION)


def cost_lines(actions: list[dict[str, Any]]) -> list[str]:
    """The measured cost of each finished change's restart, oldest first."""
    lines = []
    for action in reversed(actions):
        if action.get("state") != OPEN and (cost := restart_cost(action.get("timings") or {})):
            lines.append(f"change #{action.get('id')}: {cost}")
    return lines
