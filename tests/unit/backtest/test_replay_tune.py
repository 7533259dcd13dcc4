"""A ``tune`` policy in a backtest: its round says what the recording lacks (issue 16).

A round characterises the workload from vLLM's raw series (request counters, the prompt and
output token histograms), which reach the tuner through the signal feed. The daemon's feed
reads them from its signal store; a recording holds the views the policies saw (their
signals, the knobs), not those series. The round used to read the backtest governor's empty
store, in a worker process started on a virtual clock: each tune round of a backtest failed
with a worker or data error that said nothing of why. Now the recorded feed says so, and the
timeline shows each round as blocked with "cannot tune: the recording lacks ...", the rest
of the replay going on as in the daemon.
"""

from __future__ import annotations

from pathlib import Path

from daemon.app.backtest.runner import Options, run_backtest
from tests.unit.backtest.worlds import config, series, write_policy, write_recording

TUNE = """\
name: seqs-tune
description: While more than 10 requests run, ask the what-if for a better max_num_seqs.
targets: ["*"]
when: running > 10.0
for: 10s
action:
  tune:
    knobs: [max_num_seqs]
    window: 1m
  risk: approval
cooldown: 60s
budget_per_hour: 10
"""


def test_a_tune_round_says_the_recording_lacks_the_series_it_reads(tmp_path: Path) -> None:
    busy = series((40, {"running": 12.0}))
    recording = write_recording(tmp_path / "rec.jsonl", busy, {"max_num_seqs": 256.0})
    policies = write_policy(tmp_path / "a", "seqs-tune", TUNE)

    outcome = run_backtest(Options(config(), (recording,), policies=policies))

    assert outcome.a is not None
    rounds = [event for event in outcome.a.events if event.guard == "whatif_failed"]
    # Fired at +10 s, then once per cooldown (60 s) while it fires: every round is reported.
    assert [event.at_s for event in rounds] == [10.0, 70.0, 130.0, 190.0]
    for event in rounds:
        assert event.kind == "blocked"
        assert event.reason.startswith("cannot tune: the recording lacks ")
        assert "vllm_request_prompt_tokens_bucket" in event.reason
