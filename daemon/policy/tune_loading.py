"""A ``tune`` action as written to its :class:`~daemon.policy.spec.TuneSpec`, with its problems.

The shape is pydantic's (:class:`~daemon.policy.spec.TuneModel`); what it cannot say is
checked here: that each knob is one a what-if varies, and that a named engine profile loads
(a shipped name or a readable file), so that a tune policy that loads can always be planned.
"""

from __future__ import annotations

from daemon.core.knobs import KNOBS
from daemon.core.validation_issues import unknown_name
from daemon.policy.durations import parse_duration
from daemon.policy.spec import TUNABLE, TuneModel, TuneSpec, parse_share
from simulator.errors import SpecError
from simulator.profiles import load_profile

Problem = tuple[tuple[str | int, ...], str]  # key path under action.tune, message


def tune_spec(model: TuneModel) -> tuple[TuneSpec | None, list[Problem]]:
    """The spec, or None and every problem found (key paths relative to ``action.tune``)."""
    problems: list[Problem] = []
    for index, knob in enumerate(model.knobs):
        if knob not in KNOBS:
            message = unknown_name(f"knob {knob!r}", knob, TUNABLE, "tunable")
            problems.append((("knobs", index), message))
        elif knob not in TUNABLE:
            message = (
                f"{knob} cannot be tuned: a what-if varies {' and '.join(TUNABLE)} only "
                "(move the others with `set`)"
            )
            problems.append((("knobs", index), message))
    if len(set(model.knobs)) != len(model.knobs):
        problems.append((("knobs",), "a knob is named twice"))
    if model.profile is not None:
        try:
            load_profile(model.profile)
        except SpecError as exc:
            # A missing name has no line to point at; a broken file's first problem is enough.
            issue = exc.issues[0]
            first = issue.message if issue.line == 0 else issue.render()
            message = f"the engine profile {model.profile!r} does not load: {first}"
            problems.append((("profile",), message))
    if problems:
        return None, problems
    spec = TuneSpec(
        knobs=tuple(k for k in TUNABLE if k in model.knobs),
        objective=model.objective,
        min_gain=parse_share(model.min_gain),
        window_s=parse_duration(model.window),
        profile=model.profile,
        ttft_slo_s=parse_duration(model.ttft_slo),
        tpot_slo_s=parse_duration(model.tpot_slo),
        max_error=parse_share(model.max_error),
    )
    return spec, []
