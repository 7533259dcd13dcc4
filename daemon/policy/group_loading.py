"""``scope: group`` as written, to the canary rule of a group change, or problems.

A group change is one proposal for the replicas of a fleet group, applied to one canary,
judged against the members not yet changed, then rolled to the rest (``docs/fleet.md``). What
the shape cannot say is checked here:

- it rolls knob values (``action.set``): the values the policy computes on the member whose
  firing raised the proposal are the values every member gets; an operation, a veto, a live
  loop (admission, batch), a notice or a tune round is not a rollout;
- it starts with a person's approval (one message for the group): ``risk: auto`` would
  promise a rollout nobody approves;
- ``canary`` says how the canary is judged, and means nothing without ``scope: group``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.fleet.canary_analysis import CanaryRule
from daemon.policy.durations import parse_duration
from daemon.policy.spec import CanaryModel, PolicyModel, parse_share

Problem = tuple[tuple[str | int, ...], str]  # key path from the policy's top, message


@dataclass(frozen=True, slots=True)
class LoadedScope:
    """The canary rule (None for ``scope: instance``) and every problem found."""

    canary: CanaryRule | None
    problems: list[Problem] = field(default_factory=list)


def group_scope(model: PolicyModel) -> LoadedScope:
    """Check ``scope`` and ``canary`` of one policy; the canary rule of a group change."""
    if model.scope != "group":
        if model.canary is not None:
            message = "a canary judges a group change: add `scope: group`, or remove `canary`"
            return LoadedScope(None, [(("canary",), message)])
        return LoadedScope(None)
    problems: list[Problem] = []
    action = model.action
    if action is None or not action.set:
        message = (
            "a group change rolls knob values out, canary first: give it `action.set` "
            "(an operation, veto, admission, batch, notify or tune is not rolled out)"
        )
        problems.append((("scope",), message))
    elif action.risk == "auto":
        message = (
            "a group change starts with one approval for the group: remove `risk: auto` "
            "(or use `scope: instance`)"
        )
        problems.append((("action", "risk"), message))
    return LoadedScope(None if problems else canary_rule(model.canary or CanaryModel()), problems)


def canary_rule(model: CanaryModel) -> CanaryRule:
    """The thresholds as the analysis reads them (shares as fractions, the window in seconds)."""
    return CanaryRule(
        window_s=parse_duration(model.window),
        max_attainment_drop=parse_share(model.max_attainment_drop),
        max_goodput_drop=parse_share(model.max_goodput_drop),
        max_error_rate_rise=parse_share(model.max_error_rate_rise),
        min_requests=model.min_requests,
        ttft_slo_s=parse_duration(model.ttft_slo),
    )
