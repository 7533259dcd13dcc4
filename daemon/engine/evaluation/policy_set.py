"""The policies in force, loaded from the configured directories, swapped whole on reload.

At start, a broken file is left out (and shown in status and metrics) while the others run. On
a reload, the new set replaces the old one only if every file is valid: a half-broken reload
keeps the whole old set, so a typo pushed to one file cannot silently disable a policy.

A configured directory that is missing or cannot be read says nothing about the policies in
it, so it is never taken for an empty one: at start it is a configuration error, on a reload a
rejection that keeps the set in force.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.policy.loading import load_policies, policy_files
from daemon.policy.spec import PolicySpec
from daemon.sources.declarations import SignalRegistry
from daemon.sources.registry import BUILTIN

log = logging.getLogger(__name__)


# (file, mtime, size) of every file read; (problem, 0, -1) for a path that could not be read.
Fingerprint = tuple[tuple[str, float, int], ...]


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Specs in force, the files left out (with why), and the signals they were compiled for.

    Views are built with ``signals`` too, so that the policies and what they read change
    together on a reload.
    """

    specs: tuple[PolicySpec, ...]
    disabled: tuple[ConfigIssue, ...]
    fingerprint: Fingerprint
    signals: SignalRegistry = BUILTIN


@dataclass(frozen=True, slots=True)
class _Listing:
    """The policy files under the directories now, and the directories that could not be read."""

    files: tuple[Path, ...]
    problems: tuple[ConfigIssue, ...]
    fingerprint: Fingerprint


def load_policy_set(
    directories: Iterable[Path],
    targets: Iterable[str],
    live_targets: Iterable[str] = (),
    signals: SignalRegistry = BUILTIN,
) -> PolicySet:
    """Load every policy under ``directories``; broken files are reported and left out.

    Raises:
        ConfigError: a directory is missing or cannot be read.
    """
    listing = _list(directories)
    if listing.problems:
        raise ConfigError(list(listing.problems))
    loaded = load_policies(listing.files, targets, live_targets=live_targets, signals=signals)
    for issue in loaded.issues:
        log.error("policy file disabled", extra={"where": issue.render()})
    return PolicySet(loaded.specs, loaded.issues, listing.fingerprint, signals)


def fingerprint(directories: Iterable[Path]) -> Fingerprint:
    """What the policy files look like on disk now: a change of any means "reload"."""
    return _list(directories).fingerprint


def reload_policy_set(
    current: PolicySet,
    directories: Iterable[Path],
    targets: Iterable[str],
    live_targets: Iterable[str] = (),
    signals: SignalRegistry = BUILTIN,
) -> tuple[PolicySet, tuple[ConfigIssue, ...]]:
    """The new set if every directory reads and every file is valid, else the current one and why.

    The set kept carries the fingerprint of what was read, so that the same problem is reported
    once, not at every look of the watcher.
    """
    listing = _list(directories)
    if listing.problems:
        return replace(current, fingerprint=listing.fingerprint), listing.problems
    loaded = load_policies(listing.files, targets, live_targets=live_targets, signals=signals)
    if loaded.issues:
        return replace(current, fingerprint=listing.fingerprint), loaded.issues
    return PolicySet(loaded.specs, (), listing.fingerprint, signals), ()


def _list(directories: Iterable[Path]) -> _Listing:
    # Listed before the files are read: a file changed meanwhile then differs from the
    # fingerprint, and the watcher reads it again.
    files, problems = policy_files(directories)
    marks: list[tuple[str, float, int]] = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        marks.append((str(file), stat.st_mtime, stat.st_size))
    # A problem is part of what the directories look like: its end, or another one, reloads.
    marks.extend((problem.render(), 0.0, -1) for problem in problems)
    return _Listing(tuple(files), tuple(problems), tuple(marks))
