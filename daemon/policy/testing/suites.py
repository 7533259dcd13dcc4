"""A policy test file made runnable: times in ticks, series expanded, policies loaded.

Every problem is located (``path:line:col: key.path: message``), in the test file or in a
policy file it loads, and all of them are reported at once, as ``check`` does. A file with a
problem runs no test: a test that cannot mean what its author wrote must not pass.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.knobs import KNOBS
from daemon.core.settings import Envelope
from daemon.core.toml_locations import KeyPath
from daemon.core.validation_issues import closest
from daemon.core.yaml_documents import LocatedDocument, load_located_yaml
from daemon.policy.durations import parse_duration
from daemon.policy.loading import load_policies
from daemon.policy.spec import PolicySpec
from daemon.policy.testing.models import (
    ApprovalModel,
    CaseModel,
    ExpectedDecisionModel,
    PolicyTestsModel,
)
from daemon.policy.testing.places import Place, place_of, validation_issues
from daemon.policy.testing.series import MAX_VALUES, SeriesError, Value, parse_series
from daemon.policy.testing.timing import format_seconds
from daemon.sources.registry import BUILTIN

SignalValues = list[Value] | dict[str, list[Value]]  # map signals: one series per key


@dataclass(frozen=True, slots=True)
class ExpectedDecision:
    """A decision pattern: the keys that are None match anything."""

    policy: str | None
    target: str | None
    kind: str | None
    set: Mapping[str, float] | None
    guard: str | None
    operation: str | None


@dataclass(frozen=True, slots=True)
class Expectation:
    """Exactly these decisions at tick ``tick``."""

    tick: int
    decisions: tuple[ExpectedDecision, ...]
    place: Place


@dataclass(frozen=True, slots=True)
class Approval:
    """An answer to the pending proposal(s) of ``policy``, after the tick ``tick``."""

    tick: int
    policy: str
    target: str | None
    approve: bool
    place: Place


@dataclass(frozen=True, slots=True)
class FinalExpectation:
    """Knob values and phases at the end."""

    knobs: Mapping[str, Mapping[str, float]]
    phases: Mapping[tuple[str, str], str]  # (policy, target) -> phase name
    place: Place


@dataclass(frozen=True, slots=True)
class Case:
    """One test, ready to simulate over ticks ``0..last_tick``."""

    name: str
    place: Place
    last_tick: int
    series: Mapping[str, Mapping[str, SignalValues]]  # target -> signal -> values
    approvals: tuple[Approval, ...]
    expectations: tuple[Expectation, ...]
    final: FinalExpectation | None


@dataclass(frozen=True, slots=True)
class TargetSetup:
    """A simulated instance at t=0."""

    knobs: Mapping[str, float]
    envelopes: Mapping[str, Envelope]


@dataclass(frozen=True, slots=True)
class Suite:
    """A whole test file."""

    path: Path
    specs: tuple[PolicySpec, ...]
    interval_s: float
    start: datetime
    targets: Mapping[str, TargetSetup]
    cases: tuple[Case, ...]


def load_suite(path: Path) -> Suite:
    """Read, validate and prepare a test file and the policies it names.

    Raises:
        ConfigError: every problem, in the test file and in the policy files.
    """
    document = load_located_yaml(path)
    try:
        model = PolicyTestsModel.model_validate(document.data)
    except ValidationError as exc:
        raise ConfigError(validation_issues(exc, document)) from None
    return _Builder(document, model).build()


class _Builder:
    """Collects every problem while it turns the model into a :class:`Suite`."""

    def __init__(self, document: LocatedDocument, model: PolicyTestsModel) -> None:
        self.document = document
        self.model = model
        self.issues: list[ConfigIssue] = []
        self.interval_s = parse_duration(model.interval)
        self.policy_names: frozenset[str] | None = None  # None: unknown (a policy is broken)

    def problem(self, where: KeyPath, message: str) -> None:
        self.issues.append(place_of(self.document, where).issue(message))

    def build(self) -> Suite:
        if self.interval_s <= 0:
            self.problem(("interval",), "the interval must be positive")
            self.interval_s = 1.0
        specs = self._policies()
        targets = {name: self._target(name) for name in self.model.targets}
        cases = tuple(self._case(index, case) for index, case in enumerate(self.model.tests))
        self._unique_names()
        if self.issues:
            key = lambda issue: (str(issue.path), issue.line, issue.column)  # noqa: E731
            raise ConfigError(sorted(self.issues, key=key))
        return Suite(self.document.path, specs, self.interval_s, self.model.start, targets, cases)

    def _policies(self) -> tuple[PolicySpec, ...]:
        paths = []
        for index, entry in enumerate(self.model.policies):
            path = self.document.path.parent / entry
            if path.exists():
                paths.append(path)
            else:
                self.problem(("policies", index), f"no such file or directory: {path}")
        loaded = load_policies(paths)
        self.issues.extend(loaded.issues)
        if not loaded.issues and len(paths) == len(self.model.policies):
            self.policy_names = frozenset(spec.name for spec in loaded.specs)
        return loaded.specs

    def _target(self, name: str) -> TargetSetup:
        setup = self.model.targets[name]
        for section, knobs in (("knobs", setup.knobs), ("envelopes", setup.envelopes)):
            for knob in knobs:
                self._known_knob(("targets", name, section, knob), knob)
        return TargetSetup({k: float(v) for k, v in setup.knobs.items()}, dict(setup.envelopes))

    def _known_knob(self, where: KeyPath, knob: str) -> None:
        if knob not in KNOBS:
            self.problem(where, f"unknown knob {knob!r}{_suggest(knob, KNOBS)}")

    def _known_target(self, where: KeyPath, target: str | None) -> None:
        if target is not None and target not in self.model.targets:
            known = ", ".join(sorted(self.model.targets))
            self.problem(where, f"unknown target {target!r} (targets of this file: {known})")

    def _known_policy(self, where: KeyPath, policy: str | None) -> None:
        names = self.policy_names
        if policy is not None and names is not None and policy not in names:
            known = ", ".join(sorted(names)) or "none"
            self.problem(where, f"unknown policy {policy!r} (policies loaded: {known})")

    def _unique_names(self) -> None:
        seen: set[str] = set()
        for index, case in enumerate(self.model.tests):
            if case.name in seen:
                self.problem(("tests", index, "name"), f"another test is named {case.name!r}")
            seen.add(case.name)

    def _case(self, index: int, case: CaseModel) -> Case:
        where: KeyPath = ("tests", index)
        series = {
            target: self._signals((*where, "series", target), signals)
            for target, signals in case.series.items()
        }
        for target in case.series:
            self._known_target((*where, "series", target), target)
        longest = max((len(v) for s in series.values() for v in _each_series(s)), default=1)
        last_tick = self._last_tick(where, case, longest - 1)
        approvals = tuple(
            self._approval((*where, "approvals", i), a, last_tick)
            for i, a in enumerate(case.approvals)
        )
        expectations = tuple(
            self._expectation((*where, "expect", i), e.at, e.decisions, last_tick)
            for i, e in enumerate(case.expect)
        )
        final = None if case.final is None else self._final((*where, "final"), case)
        return Case(
            case.name,
            place_of(self.document, (*where, "name")),
            last_tick,
            series,
            approvals,
            expectations,
            final,
        )

    def _signals(
        self, where: KeyPath, signals: Mapping[str, str | dict[str, str]]
    ) -> dict[str, SignalValues]:
        parsed: dict[str, SignalValues] = {}
        for name, given in signals.items():
            here = (*where, name)
            declared = BUILTIN.get(name)
            if declared is None:
                known = BUILTIN.names()
                self.problem(here, f"unknown signal {name!r}{_suggest(name, known)}")
            elif declared.key is not None and isinstance(given, str):
                label = declared.key
                message = f"{name} is keyed by {label}: give a series per {label}, e.g. "
                example = '{"/var/log": "0.9x30"}' if label == "path" else '{"0": "80x30"}'
                self.problem(here, message + example)
            elif declared.key is None and not isinstance(given, str):
                self.problem(here, f"{name} is one value per tick: give one series string")
            elif isinstance(given, str):
                parsed[name] = self._series(here, given)
            else:
                parsed[name] = {
                    key: self._series((*here, key), text) for key, text in given.items()
                }
        return parsed

    def _series(self, where: KeyPath, text: str) -> list[Value]:
        try:
            return parse_series(text)
        except SeriesError as exc:
            self.problem(where, str(exc))
            return []

    def _last_tick(self, where: KeyPath, case: CaseModel, series_end: int) -> int:
        if case.duration is not None:
            seconds = parse_duration(case.duration)
            last = math.floor(seconds / self.interval_s + 1e-9)
        else:
            ats = [a.at for a in case.approvals] + [e.at for e in case.expect]
            times = [self._tick(None, at) for at in ats]
            last = max([series_end, *(t for t in times if t is not None)])
        if last > MAX_VALUES:
            message = f"the test runs {last} ticks; at most {MAX_VALUES} are allowed"
            self.problem((*where, "duration"), message)
        return min(last, MAX_VALUES)

    def _tick(self, where: KeyPath | None, at: str | int | float) -> int | None:
        """The tick at ``at``; a problem (when ``where`` is given) if it is between ticks."""
        ratio = parse_duration(at) / self.interval_s
        tick = round(ratio)
        if abs(ratio - tick) > 1e-6:
            if where is not None:
                interval = format_seconds(self.interval_s)
                message = f"{at} falls between ticks: they come every {interval} from 0s"
                self.problem((*where, "at"), message)
            return None
        return tick

    def _tick_within(self, where: KeyPath, at: str | int | float, last_tick: int) -> int:
        tick = self._tick(where, at)
        if tick is not None and tick > last_tick:
            end = format_seconds(last_tick * self.interval_s)
            self.problem((*where, "at"), f"{at} is after the test's last tick ({end})")
        return tick or 0

    def _approval(self, where: KeyPath, approval: ApprovalModel, last_tick: int) -> Approval:
        self._known_policy((*where, "policy"), approval.policy)
        self._known_target((*where, "target"), approval.target)
        return Approval(
            self._tick_within(where, approval.at, last_tick),
            approval.policy,
            approval.target,
            approval.answer == "approve",
            place_of(self.document, where),
        )

    def _expectation(
        self,
        where: KeyPath,
        at: str | int | float,
        decisions: tuple[ExpectedDecisionModel, ...],
        last_tick: int,
    ) -> Expectation:
        tick = self._tick_within(where, at, last_tick)
        expected = []
        for index, decision in enumerate(decisions):
            here = (*where, "decisions", index)
            self._known_policy((*here, "policy"), decision.policy)
            self._known_target((*here, "target"), decision.target)
            for knob in decision.set or {}:
                self._known_knob((*here, "set", knob), knob)
            values = None if decision.set is None else _floats(decision.set)
            expected.append(
                ExpectedDecision(
                    decision.policy,
                    decision.target,
                    decision.kind,
                    values,
                    decision.guard,
                    decision.operation,
                )
            )
        return Expectation(tick, tuple(expected), place_of(self.document, where))

    def _final(self, where: KeyPath, case: CaseModel) -> FinalExpectation:
        assert case.final is not None
        for target, values in case.final.knobs.items():
            self._known_target((*where, "knobs", target), target)
            for knob in values:
                self._known_knob((*where, "knobs", target, knob), knob)
        phases = {}
        for policy, per_target in case.final.phases.items():
            self._known_policy((*where, "phases", policy), policy)
            for target, phase in per_target.items():
                self._known_target((*where, "phases", policy, target), target)
                phases[(policy, target)] = phase
        knobs = {target: _floats(values) for target, values in case.final.knobs.items()}
        return FinalExpectation(knobs, phases, place_of(self.document, where))


def _each_series(signals: Mapping[str, SignalValues]) -> list[list[Value]]:
    out: list[list[Value]] = []
    for values in signals.values():
        out.extend(values.values() if isinstance(values, dict) else [values])
    return out


def _floats(values: Mapping[str, bool | int | float]) -> dict[str, float]:
    return {knob: float(value) for knob, value in values.items()}


def _suggest(name: str, known: Collection[str]) -> str:
    close = closest(name, known)
    return f" (did you mean {close!r}?)" if close else ""
