"""Policy files to specs: every problem located by file, line, column and key path.

Every problem of a file is reported at once: its shape (pydantic's model, in the words of
:mod:`daemon.core.validation_issues`), and, in the same pass, its expressions, targets, knobs,
schedule and constant values. When the shape is wrong somewhere, the parts that are right are
still compiled and checked: the wrong keys are set aside (left to their defaults) for that.

A directory is loaded file by file: a broken file is reported and left out, the others load
(the caller decides whether that is acceptable: ``check`` fails, the daemon runs the rest and
shows the broken one in status).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.http_log_level_settings import LOG_LEVEL_KNOB
from daemon.core.knobs import KNOBS
from daemon.core.settings import Envelope
from daemon.core.toml_locations import KeyPath, nearest_location
from daemon.core.validation_issues import unknown_name, validation_issues
from daemon.core.yaml_documents import LocatedDocument, load_located_yaml, parse_located_yaml
from daemon.policy.admission.controllers import build_controller
from daemon.policy.batch_loading import batch_lane_spec, lane_policy_problems
from daemon.policy.durations import parse_duration
from daemon.policy.expressions import Expression, ExpressionError, compiler
from daemon.policy.group_loading import group_scope
from daemon.policy.notify_text import template_problems
from daemon.policy.partial_documents import valid_part
from daemon.policy.schedules import cron_times, cron_window
from daemon.policy.spec import (
    ALL_TARGETS,
    ActionModel,
    ActionSpec,
    AdmissionModel,
    AdmissionSpec,
    KnobChange,
    NoData,
    NotifyModel,
    NotifySpec,
    PolicyModel,
    PolicySpec,
)
from daemon.policy.tune_loading import tune_spec
from daemon.sources.declarations import SignalRegistry
from daemon.sources.registry import BUILTIN

POLICY_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """The specs that loaded, and the problems of those that did not."""

    specs: tuple[PolicySpec, ...]
    issues: tuple[ConfigIssue, ...]
    broken_files: tuple[Path, ...]


def policy_files(paths: Iterable[Path]) -> tuple[list[Path], list[ConfigIssue]]:
    """Policy files under ``paths`` (files, or directories of ``*.yaml``), sorted per directory.

    A path that does not exist or cannot be read (no permission to list or reach it) is an
    issue of its own, never an empty directory.
    """
    files: list[Path] = []
    issues: list[ConfigIssue] = []
    for path in paths:
        try:
            if path.is_dir():
                files.extend(sorted(p for p in path.iterdir() if p.suffix in POLICY_SUFFIXES))
            elif path.is_file():
                files.append(path)
            else:
                issues.append(ConfigIssue(path, 0, 0, "", "no such file or directory"))
        except OSError as exc:
            issues.append(ConfigIssue(path, 0, 0, "", f"cannot read it: {exc.strerror or exc}"))
    return files, issues


def unreadable_reason(file: Path) -> str | None:
    """Why ``file`` is not read as a policy file, or None when it may be.

    A symlink leading out of the file's directory, or anything but a regular file, is refused
    unread: an error about a file quotes what it says, and a link to another file (a secret,
    say) must not have that file's lines shown in the log and in status. The reason names
    nothing of the link's target.
    """
    try:
        if file.is_symlink():
            target = file.resolve(strict=True)
            if not target.is_relative_to(file.parent.resolve(strict=True)):
                return (
                    "a symlink to a file outside the policy directory: refused, not read "
                    "(copy the policy into the directory instead)"
                )
        if not file.is_file():
            return "not a regular file: refused, not read"
    except OSError as exc:
        return f"cannot read it: {exc.strerror or type(exc).__name__}"
    return None


def load_policies(
    paths: Iterable[Path],
    targets: Iterable[str] | None = None,
    envelopes: Mapping[tuple[str, str], Envelope] | None = None,
    live_targets: Iterable[str] = (),
    signals: SignalRegistry = BUILTIN,
) -> LoadedPolicies:
    """Load every policy file under ``paths``.

    ``targets`` are the configured target names, ``envelopes`` their knobs' envelopes: a
    constant knob value outside the envelope of a target the policy applies to is an error.
    ``live_targets`` are those changed live (``[[http_log_level]]``): only ``log_level`` may
    be set there, and a policy aimed at them alone needs no approval by default.
    ``signals`` are the signals the configuration declares (default: the built-in sources').
    """
    live = frozenset(live_targets)
    files, issues = policy_files(paths)
    known_targets = None if targets is None else frozenset(targets)
    specs: list[PolicySpec] = []
    broken: list[Path] = []
    names: dict[str, Path] = {}
    for file in files:
        if (reason := unreadable_reason(file)) is not None:
            issues.append(ConfigIssue(file, 0, 0, "", reason))
            broken.append(file)
            continue
        try:
            spec = load_policy(file, known_targets, envelopes, live, signals)
        except ConfigError as exc:
            issues.extend(exc.issues)
            broken.append(file)
            continue
        if spec.name in names:
            message = f"policy name {spec.name!r} is already used by {names[spec.name]}"
            issues.append(ConfigIssue(file, 1, 1, "name", message))
            broken.append(file)
            continue
        names[spec.name] = file
        specs.append(spec)
    return LoadedPolicies(tuple(specs), tuple(issues), tuple(broken))


def load_policy(
    path: Path,
    targets: frozenset[str] | None = None,
    envelopes: Mapping[tuple[str, str], Envelope] | None = None,
    live_targets: frozenset[str] = frozenset(),
    signals: SignalRegistry = BUILTIN,
) -> PolicySpec:
    """Load one policy file.

    Raises:
        ConfigError: every problem found in the file.
    """
    return _from_document(load_located_yaml(path), targets, envelopes, live_targets, signals)


def parse_policy(
    text: str,
    path: Path,
    targets: frozenset[str] | None = None,
    signals: SignalRegistry = BUILTIN,
) -> PolicySpec:
    """Load one policy from ``text`` (``path`` names it in messages).

    Raises:
        ConfigError: every problem found in the text.
    """
    return _from_document(parse_located_yaml(text, path), targets, signals=signals)


def _from_document(
    document: LocatedDocument,
    targets: frozenset[str] | None,
    envelopes: Mapping[tuple[str, str], Envelope] | None = None,
    live_targets: frozenset[str] = frozenset(),
    signals: SignalRegistry = BUILTIN,
) -> PolicySpec:
    try:
        model = PolicyModel.model_validate(document.data)
    except ValidationError as exc:
        issues = validation_issues(
            exc,
            model=PolicyModel,
            path=document.path,
            data=document.data,
            locations=document.locations,
        )
        issues += _issues_beyond_the_shape(document, targets, live_targets, signals)
        raise ConfigError(sorted(issues, key=lambda issue: (issue.line, issue.column))) from None
    spec = _compile(model, document, targets, live_targets, signals)
    issues = _literal_envelope_issues(spec, document, envelopes or {})
    if issues:
        raise ConfigError(issues)
    return spec


def _issues_beyond_the_shape(
    document: LocatedDocument,
    targets: frozenset[str] | None,
    live_targets: frozenset[str],
    signals: SignalRegistry,
) -> list[ConfigIssue]:
    """What compiling finds in the parts of a misshapen file that are right.

    Problems found at or around a key set aside are not reported: they would be consequences
    of setting it aside (an action left with nothing to do), not problems of the file.
    """
    part = valid_part(document.data)
    if part is None:
        return []
    try:
        _compile(part.model, document, targets, live_targets, signals)
    except ConfigError as exc:
        return [issue for issue in exc.issues if not part.near_aside(issue.key_path)]
    return []


def _literal_envelope_issues(
    spec: PolicySpec, document: LocatedDocument, envelopes: Mapping[tuple[str, str], Envelope]
) -> list[ConfigIssue]:
    """A constant knob value that no target's envelope allows can never be applied as written."""
    issues = []
    for change in spec.action.changes if spec.action else ():
        if change.value.signals:
            continue  # depends on `current` or signals: bounded at run time
        try:
            value = float(change.value.evaluate({}))
        except (ExpressionError, TypeError, ValueError):
            continue
        for (target, knob), envelope in sorted(envelopes.items()):
            inside = envelope.min <= value <= envelope.max
            if knob == change.knob and spec.applies_to(target) and not inside:
                message = (
                    f"{value:g} is outside {target}'s envelope for {knob} "
                    f"[{envelope.min:g}, {envelope.max:g}] in config.toml"
                )
                issues.append(_issue(document, ("action", "set", knob), message))
    return issues


def _compile(
    model: PolicyModel,
    document: LocatedDocument,
    targets: frozenset[str] | None,
    live_targets: frozenset[str] = frozenset(),
    signals: SignalRegistry = BUILTIN,
) -> PolicySpec:
    issues: list[ConfigIssue] = []
    compile_ = compiler(signals)

    def expression(source: str, where: KeyPath, compile_: Any) -> Expression | None:
        try:
            compiled: Expression = compile_(source)
        except ExpressionError as exc:
            issues.append(_issue(document, where, f"{exc} (expression column {exc.column})"))
            return None
        return compiled

    when = expression(model.when, ("when",), compile_.condition)
    clear = None if model.clear is None else expression(model.clear, ("clear",), compile_.condition)
    action = _action(
        model.action, document, issues, expression, when, compile_action=compile_.action
    )
    if action is not None and model.action is not None and live_targets:
        action = _live_action(model, action, live_targets, document, issues)
    if action is not None and action.admission is not None and model.on_no_data == "assume_bad":
        message = (
            "an admission loop steers the gate while its policy fires, so assume_bad would "
            "have it act on missing data: use hold or assume_ok"
        )
        issues.append(_issue(document, ("on_no_data",), message))
    if action is not None and action.batch is not None:
        scheduled_at = bool(model.schedule and model.schedule.at)
        problems = lane_policy_problems(action.batch, model.on_no_data, scheduled_at)
        issues.extend(_issue(document, where, text) for where, text in problems)
    scope = group_scope(model)
    issues.extend(_issue(document, where, text) for where, text in scope.problems)
    windows = []
    for index, window in enumerate(model.schedule.windows if model.schedule else ()):
        try:
            windows.append(
                cron_window(window.cron, parse_duration(window.duration), window.timezone)
            )
        except ValueError as exc:
            issues.append(_issue(document, ("schedule", "windows", index, "cron"), str(exc)))
    moments = []
    for index, moment in enumerate(model.schedule.at if model.schedule else ()):
        try:
            moments.append(cron_times(moment.cron, moment.timezone))
        except ValueError as exc:
            issues.append(_issue(document, ("schedule", "at", index, "cron"), str(exc)))
    if targets is not None:
        for index, target in enumerate(model.targets):
            if target != "*" and target not in targets:
                what = f"target {target!r}"
                message = (
                    unknown_name(what, target, targets, "targets")
                    if targets
                    else (f"unknown {what} (targets: none configured)")
                )
                issues.append(_issue(document, ("targets", index), message))
    if issues or when is None:
        raise ConfigError(sorted(issues, key=lambda issue: (issue.line, issue.column)))
    return PolicySpec(
        name=model.name,
        description=model.description,
        source=str(document.path),
        targets=model.targets,
        when=when,
        clear=clear,
        for_s=parse_duration(model.for_),
        keep_firing_for_s=parse_duration(model.keep_firing_for),
        on_no_data=NoData(model.on_no_data),
        action=action,
        cooldown_s=parse_duration(model.cooldown),
        budget_per_hour=model.budget_per_hour,
        shadow=model.mode == "shadow",
        windows=tuple(windows),
        at=tuple(moments),
        canary=scope.canary,
    )


def _action(
    model: ActionModel | None,
    document: LocatedDocument,
    issues: list[ConfigIssue],
    expression: Any,
    when: Expression | None,
    *,
    compile_action: Any,
) -> ActionSpec | None:
    if model is None:
        return None
    doings = (model.set, model.operation, model.veto, model.admission, model.notify, model.tune)
    if sum(map(bool, (*doings, model.batch))) != 1:
        message = (
            "an action does exactly one thing: set knobs, run an operation, veto knobs, "
            "run an admission controller, notify, tune, or open or close the batch lane"
        )
        issues.append(_issue(document, ("action",), message))
        return None
    # An unknown knob is an issue, so the file does not load; the rest is still checked.
    for knob in model.set:
        _unknown_knob(knob, ("action", "set", knob), document, issues)
    for index, knob in enumerate(model.veto):
        _unknown_knob(knob, ("action", "veto", index), document, issues)
    if model.veto:
        return ActionSpec((), None, "auto", tuple(model.veto))
    if model.admission is not None or model.batch is not None:
        return _through_firing(model, document, issues, compile_action)
    if model.notify is not None or model.tune is not None:
        return _told_or_tuned(model, document, issues, when)
    changes = []
    for knob, value in model.set.items():
        if knob not in KNOBS:
            continue  # reported above; its expression would be checked against nothing
        compiled = expression(
            str(value).lower() if isinstance(value, bool) else str(value),
            ("action", "set", knob),
            compile_action,
        )
        if compiled is not None:
            changes.append(KnobChange(knob, compiled))
    restarts = model.operation == "restart" or any(
        KNOBS[k].restart_required for k in model.set if k in KNOBS
    )
    risk = model.risk or ("approval" if restarts else "auto")
    return ActionSpec(tuple(changes), model.operation, risk)


def _told_or_tuned(
    model: ActionModel,
    document: LocatedDocument,
    issues: list[ConfigIssue],
    when: Expression | None,
) -> ActionSpec | None:
    """A notification, or a tune action (whose values a what-if picks: approval by default)."""
    if model.notify is not None:
        return _notify(model.notify, document, issues, when)
    assert model.tune is not None
    tune, problems = tune_spec(model.tune)
    issues.extend(_issue(document, ("action", "tune", *where), text) for where, text in problems)
    return None if tune is None else ActionSpec((), None, model.risk or "approval", tune=tune)


def _unknown_knob(
    knob: str, where: KeyPath, document: LocatedDocument, issues: list[ConfigIssue]
) -> None:
    """Report ``knob`` at ``where`` when there is no such knob."""
    if knob not in KNOBS:
        message = unknown_name(f"knob {knob!r}", knob, KNOBS, "known")
        issues.append(_issue(document, where, message))


def _live_action(
    model: PolicyModel,
    action: ActionSpec,
    live_targets: frozenset[str],
    document: LocatedDocument,
    issues: list[ConfigIssue],
) -> ActionSpec:
    """A live target takes ``log_level`` only; aimed at live targets alone, risk is auto.

    A policy for every target (``*``) still reaches the vLLM instances, where ``log_level``
    is a restart: its default risk stays approval, and the gate refuses any vLLM-only knob on
    a live target.
    """
    assert model.action is not None
    for index, target in enumerate(model.targets):
        if target not in live_targets:
            continue
        wrong = [k for k in model.action.set if k != LOG_LEVEL_KNOB]
        if wrong or model.action.operation:
            what = ", ".join(wrong) or f"operation {model.action.operation}"
            message = f"{target} is a live log-level target: it takes log_level only, not {what}"
            issues.append(_issue(document, ("targets", index), message))
    aimed_at_live = ALL_TARGETS not in model.targets and set(model.targets) <= live_targets
    if aimed_at_live and model.action.risk is None and action.changes:
        return replace(action, risk="auto")  # a live change restarts nothing
    return action


def _notify(
    model: NotifyModel,
    document: LocatedDocument,
    issues: list[ConfigIssue],
    when: Expression | None,
) -> ActionSpec | None:
    """A notification only tells people: it is never a change, so its risk is always auto."""
    signals = set() if when is None else when.signals
    problems = template_problems(model.text, signals)
    for problem in problems:
        issues.append(_issue(document, ("action", "notify", "text"), problem))
    if problems:
        return None
    spec = NotifySpec(model.text, tuple(dict.fromkeys(model.channels)))
    return ActionSpec((), None, "auto", notify=spec)


def _through_firing(
    model: ActionModel, document: LocatedDocument, issues: list[ConfigIssue], compile_action: Any
) -> ActionSpec | None:
    """An action that acts while its policy fires: an admission loop, or the batch lane's width.

    Both are live (no restart, nothing to approve): their risk is always auto.
    """
    if model.batch is not None:
        lane = batch_lane_spec(model.batch, model.risk, compile_action)
        issues.extend(_issue(document, ("action", *where), text) for where, text in lane.problems)
        return None if lane.spec is None else ActionSpec((), None, "auto", batch=lane.spec)
    assert model.admission is not None
    admission = _admission(model.admission, document, issues)
    return None if admission is None else ActionSpec((), None, "auto", admission=admission)


def _admission(
    model: AdmissionModel, document: LocatedDocument, issues: list[ConfigIssue]
) -> AdmissionSpec | None:
    """The admission controller, built once here so that a bad name or parameter is a load error."""
    try:
        build_controller(
            model.controller, min_cap=model.min_cap, max_cap=max(model.min_cap, 1), **model.params
        )
    except ValueError as exc:
        issues.append(_issue(document, ("action", "admission", "controller"), str(exc)))
        return None
    return AdmissionSpec(
        controller=model.controller,
        interval_s=parse_duration(model.every),
        min_cap=model.min_cap,
        params=dict(model.params),
    )


def _issue(document: LocatedDocument, where: KeyPath, message: str) -> ConfigIssue:
    location = nearest_location(document.locations, where)
    key_path = ".".join(str(part) for part in where)
    return ConfigIssue(document.path, location.line, location.column, key_path, message)
