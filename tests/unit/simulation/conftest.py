"""Tiny workloads for the simulate tests: seconds of wall time, not minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"

TINY = """\
name: tiny
duration_s: {duration}
seed: 3
arrivals: {{rate_rps: {rate}, cv: 1.1}}
bursts:
  - {{start_s: 60, duration_s: 30, multiplier: 3.0}}
phases:
  - {{name: calm, start_s: 0, duration_s: 60}}
  - {{name: burst, start_s: 60, duration_s: {rest}}}
prompt_tokens: {{median: 1020, p90: 2734, min: 1, max: 8192}}
output_tokens: {{median: 129, p90: 424, min: 1, max: 1000}}
"""

THRASH = """\
name: thrash
duration_s: 420
seed: 5
arrivals: {rate_rps: 6.0, cv: 1.1}
prompt_tokens: {median: 1020, p90: 2734, min: 1, max: 8192}
output_tokens: {median: 129, p90: 424, min: 1, max: 1000}
long_outputs: {share: 0.3, tokens: 4096}
"""


def write_tiny(directory: Path, *, rate: float = 12.0, duration: float = 150.0) -> Path:
    """A tiny spec: a calm minute, then a 3x burst of 30 s."""
    path = directory / "tiny.yaml"
    path.write_text(TINY.format(rate=rate, duration=duration, rest=duration - 60))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A tiny workload spec on disk."""
    return write_tiny(tmp_path)


@pytest.fixture
def thrash(tmp_path: Path) -> Path:
    """Seven minutes in which long outputs thrash the 8B profile's KV cache at its defaults."""
    path = tmp_path / "thrash.yaml"
    path.write_text(THRASH)
    return path
