"""The router: the evaluator's accepted intents to the runner, to approval, or blocked.

:func:`daemon.engine.actuation.routing.route` decides (pure); this stage carries it out: automatic
changes to the runner of the actuator kind that owns their target, approval-risk intents to
the approvals plane's ``propose``. It is built after both, so each gets its collaborators
at construction and neither knows the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter

from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.actuation.routing import route
from daemon.policy.decisions import Decision


class Router:
    """Sends each accepted intent where :func:`route` says."""

    def __init__(
        self,
        actuation: ActuationPlane,
        registry: CollectorRegistry,
        *,
        propose: Callable[[Decision], None],
    ) -> None:
        self._actuation = actuation
        self._propose = propose
        self._proposals = Counter(
            "vllm_governor_proposals",
            "Changes proposed for approval.",
            ["target"],
            registry=registry,
        )

    def submit(self, accepted: Sequence[Decision]) -> list[Decision]:
        """Route accepted intents; returns the decisions to record for the ones blocked here."""
        if not accepted:
            return []
        actuation = self._actuation
        routing = route(accepted, actuation.owners(), actuation.journal.quarantined())
        decisions = {(d.policy, d.target): d for d in accepted}
        for request in routing.proposals:
            self._proposals.labels(target=request.target).inc()
            self._propose(decisions[(request.policy, request.target)])
        for owner, request in routing.auto:
            actuation.enqueue(owner, request)
        return routing.blocked
