"""What every demo run must leave behind: consistent counts, and nothing running."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_consistent(summary: dict[str, Any]) -> None:
    """Every request accounted for once; attainment and goodput follow from the counts."""
    counts = summary["requests"]
    accounted = sum(
        counts[key]
        for key in (
            "completed", "aborted_by_restarts", "rejected", "missed_while_down",
            "in_flight_at_end",
        )
    )  # fmt: skip
    assert accounted == counts["arrived"] > 0, counts
    assert 0 <= counts["met_slo"] <= counts["completed"]
    judged = counts["arrived"] - counts["in_flight_at_end"]
    assert summary["slo_attainment"] == pytest.approx(counts["met_slo"] / judged)
    assert summary["goodput_rps"] == pytest.approx(counts["met_slo"] / summary["run_s"], rel=1e-3)
    # The gate's 503s are rejections, misses of the act they arrived in.
    gated = [act["with_governor"] for act in summary.get("acts", [])]
    for act in gated:
        assert 0 <= act["gate"]["refused"] <= act["arrived"] - act["met_slo"], act
    assert sum(act["gate"]["refused"] for act in gated) <= counts["rejected"], counts


def assert_left_nothing(output: str) -> None:
    """The demo's temporary directory is gone and no process names it any more."""
    scratch = re.search(r"files, sockets and logs in (\S+);", output)
    assert scratch is not None, output[:2000]
    assert not Path(scratch.group(1)).exists()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue  # the process ended meanwhile
        assert scratch.group(1) not in text, f"left running: {text!r}"
