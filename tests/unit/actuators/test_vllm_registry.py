from __future__ import annotations

from pathlib import Path

import pytest

from actuators.vllm.registry import (
    NEWER_THAN_KNOWN,
    V0_32,
    V0_33,
    Where,
    registry_for,
)
from actuators.vllm.versions import Version, parse_version
from daemon.api import KNOBS, ActuationRefused
from tests.support.vllm_help import options_of, registry_mismatches


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.33.0", Version(0, 33, 0)),
        ("0.34.0rc1", Version(0, 34, 0)),
        ("0.35.1.dev7+g1a2b3c", Version(0, 35, 1)),
        ("v1.2", Version(1, 2, 0)),
        ("dev", None),
        ("", None),
    ],
)
def test_versions_as_vllm_reports_them(text: str, expected: Version | None) -> None:
    assert parse_version(text) == expected


def test_the_running_version_picks_the_registry() -> None:
    assert registry_for("0.33.0") is V0_33
    assert registry_for("0.33.2") is V0_33
    assert registry_for("0.34.0rc1") is NEWER_THAN_KNOWN
    assert registry_for("1.0.0") is NEWER_THAN_KNOWN


@pytest.mark.parametrize(
    ("text", "guard"), [(None, "version"), ("x", "version"), ("0.31.4", "version")]
)
def test_unknown_unreadable_and_older_versions_are_refused(text: str | None, guard: str) -> None:
    with pytest.raises(ActuationRefused) as caught:
        registry_for(text)
    assert caught.value.guard == guard


def test_0_33_knows_every_knob_of_the_policy_language() -> None:
    assert set(V0_33.knobs) == set(KNOBS)
    assert V0_33.flag("log_level").where is Where.ENV
    assert V0_33.flag("log_level").key == "VLLM_LOGGING_LEVEL"
    assert V0_33.flag("uvicorn_log_level").key == "uvicorn-log-level"
    assert V0_33.flag("enable_log_requests").key == "enable-log-requests"
    assert all(flag.restart_required for flag in V0_33.knobs.values())
    assert V0_33.batch_window == ("prefill_schedule_interval", "max_num_batched_tokens")


def test_newer_versions_get_only_long_standing_knobs() -> None:
    assert set(NEWER_THAN_KNOWN.knobs) < set(V0_33.knobs)
    with pytest.raises(ActuationRefused, match="no knob 'prefill_schedule_interval'"):
        NEWER_THAN_KNOWN.flag("prefill_schedule_interval")


def test_removed_and_blinding_flags_are_listed() -> None:
    assert {"max-num-partial-prefills", "scheduler-delay-factor"} <= set(V0_33.removed)
    assert "disable-log-stats" in V0_33.never


HELP_0_32 = Path(__file__).resolve().parents[2] / "fixtures/vllm-metrics/real-0.32-cpu"


def test_0_32_is_known_and_its_registry_matches_its_real_help_text() -> None:
    assert registry_for("0.32.0") is V0_32
    help_text = (HELP_0_32 / "serve-help-all.txt").read_text()
    assert registry_mismatches(V0_32, help_text) == []
    # The checker itself sees a dropped or retyped flag.
    dropped = help_text.replace("--max-num-seqs MAX_NUM_SEQS", "--max-num-seqz MAX_NUM_SEQS")
    assert registry_mismatches(V0_32, dropped) == ["--max-num-seqs does not exist"]
    moved = help_text.replace("(default: 1)\n  --scheduler-cls", "(default: 2)\n  --scheduler-cls")
    assert registry_mismatches(V0_32, moved) == ["--prefill-schedule-interval defaults to 2, not 1"]
    # disable-log-stats exists (the governor never sets it); removed flags do not.
    assert "disable-log-stats" in options_of(help_text)
