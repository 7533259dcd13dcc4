"""The policies in force, loaded from the configured directories, swapped whole on reload.

At start, a broken file is left out (and shown in status and metrics) while the others run. On
a reload, the new set replaces the old one only if every file is valid: a half-broken reload
keeps the whole old set, so a typo pushed to one file cannot silently disable a policy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from daemon.core.errors import ConfigIssue
from daemon.policy.loading import load_policies, policy_files
from daemon.policy.spec import PolicySpec
from daemon.sources.declarations import SignalRegistry
from daemon.sources.registry import BUILTIN

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Specs in force, the files left out (with why), and the signals they were compiled for.

    Views are built with ``signals`` too, so that the policies and what they read change
    together on a reload.
    """

    specs: tuple[PolicySpec, ...]
    disabled: tuple[ConfigIssue, ...]
    fingerprint: tuple[tuple[str, float, int], ...]  # (file, mtime, size) of every file read
    signals: SignalRegistry = BUILTIN


def load_policy_set(
    directories: Iterable[Path],
    targets: Iterable[str],
    live_targets: Iterable[str] = (),
    signals: SignalRegistry = BUILTIN,
) -> PolicySet:
    """Load every policy under ``directories``; broken files are reported and left out."""
    existing = [directory for directory in directories if directory.exists()]
    loaded = load_policies(existing, targets, live_targets=live_targets, signals=signals)
    for issue in loaded.issues:
        log.error("policy file disabled", extra={"where": issue.render()})
    return PolicySet(loaded.specs, loaded.issues, fingerprint(existing), signals)


def fingerprint(directories: Iterable[Path]) -> tuple[tuple[str, float, int], ...]:
    """What the policy files look like on disk now: a change of any means "reload"."""
    files, _ = policy_files(directory for directory in directories if directory.exists())
    marks = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        marks.append((str(file), stat.st_mtime, stat.st_size))
    return tuple(marks)


def reload_policy_set(
    current: PolicySet,
    directories: Iterable[Path],
    targets: Iterable[str],
    live_targets: Iterable[str] = (),
    signals: SignalRegistry = BUILTIN,
) -> tuple[PolicySet, tuple[ConfigIssue, ...]]:
    """The new set if every file is valid, else the current one and the problems."""
    existing = [directory for directory in directories if directory.exists()]
    loaded = load_policies(existing, targets, live_targets=live_targets, signals=signals)
    if loaded.issues:
        kept = PolicySet(current.specs, current.disabled, fingerprint(existing), current.signals)
        return kept, loaded.issues
    return PolicySet(loaded.specs, (), fingerprint(existing), signals), ()
