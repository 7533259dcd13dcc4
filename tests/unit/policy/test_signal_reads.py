"""The signals a set of policies reads: what the evaluator's views compute (issue 15, finding 10)."""

from __future__ import annotations

from pathlib import Path

from daemon.policy.loading import parse_policy
from daemon.policy.signal_reads import LANE_READS, signals_read

SET = """\
name: grow
when: kv_usage < 0.5 && gate_cap_share > 0.9
clear: ttft_p99_s > 2.0
action:
  set: {max_num_seqs: "current * (1.0 + preemptions_per_s)"}
  risk: approval
"""
BATCH = """\
name: night-batch
when: running < 4.0
action:
  batch: {open: true, concurrency: "math.least(current + 2.0, 16.0 - tpot_p95_s)"}
"""


def test_conditions_knob_values_and_lane_widths_are_read_with_a_knob_signals_base() -> None:
    specs = [parse_policy(SET, Path("grow.yaml")), parse_policy(BATCH, Path("batch.yaml"))]
    assert signals_read(specs) == LANE_READS | {
        "kv_usage",
        "gate_cap_share",
        "gate_cap",  # gate_cap_share is gate_cap over max_num_seqs, computed in the view
        "ttft_p99_s",
        "preemptions_per_s",
        "running",
        "tpot_p95_s",
    }


def test_no_policy_reads_only_what_the_batch_lane_checks() -> None:
    assert signals_read([]) == LANE_READS == {"waiting", "running"}


def test_a_lane_pace_over_signals_is_read_too() -> None:
    paced = BATCH.replace(
        '- tpot_p95_s)"}', '- tpot_p95_s)", start_spacing: "prompt_tokens_per_s / 1000.0"}'
    )
    assert "prompt_tokens_per_s" in signals_read([parse_policy(paced, Path("batch.yaml"))])
