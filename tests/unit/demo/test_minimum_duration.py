"""A demo too short for its story is refused with the minimum (issue 19, finding 9).

Before, ``--duration 30`` ran for a minute and ended with "the governor proposed and changed
nothing". The minimum follows the story's policy on the demo's clock (issue 16: the demo's
copy of the pack cuts ``ttft-queue``'s ``for`` and tune window), not its ``for`` as shipped.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from daemon.app.cli import main
from daemon.app.defaults import EXIT_USAGE
from daemon.app.demo.pack_timing import DEMO_FOR_S, DEMO_WINDOW_S
from daemon.app.demo.scenario import DEFAULT_PACK, MARGIN_S, minimum_duration_s

TUNE = {"tune": {"knobs": ["max_num_batched_tokens"], "window": "10m"}, "risk": "approval"}
SET = {"set": {"max_num_batched_tokens": "current * 1.25"}, "risk": "approval"}


def _pack(tmp_path: Path, action: Mapping[str, object] | None) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir()
    for policy in DEFAULT_PACK.glob("*.yaml"):
        shutil.copy(policy, pack / policy.name)
    queue = pack / "ttft-queue.yaml"
    if action is None:
        queue.unlink()
        return pack
    document = yaml.safe_load(queue.read_text())
    document["action"] = dict(action)
    queue.write_text(yaml.safe_dump(document))
    return pack


def test_a_too_short_duration_is_refused_with_the_minimum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--duration", "30", "--approve", "deny"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "--duration 30 is too short for the governor to act" in error
    assert f"ttft-queue acts in the demo once its condition has held for {DEMO_FOR_S:g} s" in error
    assert f"use --duration {minimum_duration_s(DEFAULT_PACK)[0]:g} or more" in error


def test_a_tuning_story_needs_its_window_after_the_change(tmp_path: Path) -> None:
    minimum, why = minimum_duration_s(_pack(tmp_path, TUNE))
    assert minimum == DEMO_FOR_S + DEMO_WINDOW_S + MARGIN_S
    assert minimum <= 180.0  # the demo's three minutes tell it
    assert f"then measures its effect over {DEMO_WINDOW_S:g} s" in why


def test_a_fixed_step_story_needs_no_window(tmp_path: Path) -> None:
    assert minimum_duration_s(_pack(tmp_path, SET))[0] == DEMO_FOR_S + MARGIN_S


def test_without_the_story_policy_the_acting_policy_that_waits_least_sets_it(
    tmp_path: Path,
) -> None:
    minimum, why = minimum_duration_s(_pack(tmp_path, None))
    assert minimum >= MARGIN_S
    assert "acts only after its condition has held for" in why
