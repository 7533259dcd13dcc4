"""Reading back the settings a restarted server states, from its start-up line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actuators.vllm.atomic_files import FileSnapshot
from actuators.vllm.plan import ChangePlan, FileChange
from actuators.vllm.read_back import (
    CONFIRMED,
    CONTRADICTED,
    UNAVAILABLE,
    UNSTATED,
    compare,
    read_back,
    stated_args,
)
from daemon.api import SystemClock, VllmInstance

# The line as vLLM 0.32.0 logged it on this machine (a real start of the CPU build).
REAL_LINE = (
    "(APIServer pid=2534) INFO 12-01 15:03:14 [api_utils.py:286] non-default args: "
    "{'model_tag': '/tmp/tinymodel', 'host': '127.0.0.1', 'port': 18000, 'model': "
    "'/tmp/tinymodel', 'enforce_eager': True, 'served_model_name': ['tiny'], "
    "'distributed_executor_backend': 'uni', 'max_num_seqs': 16, 'shutdown_timeout': 10}\n"
)


def test_the_real_line_is_read_and_the_last_start_wins() -> None:
    stated = stated_args(REAL_LINE)
    assert stated is not None
    assert stated["max_num_seqs"] == 16
    assert stated["served_model_name"] == ["tiny"]
    later = REAL_LINE.replace("'max_num_seqs': 16", "'max_num_seqs': 8")
    assert stated_args(REAL_LINE + "INFO other\n" + later) == {**stated, "max_num_seqs": 8}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "INFO nothing here\n",
        "non-default args: {__import__('os').system('true')}\n",
        "non-default args: {'a': 1\n",
        "non-default args: {1, 2}\n",
    ],
)
def test_no_line_or_a_bad_one_states_nothing_and_nothing_runs(text: str) -> None:
    assert stated_args(text) is None


@given(st.text())
def test_any_output_is_read_without_error(text: str) -> None:
    stated = stated_args(text)
    assert stated is None or isinstance(stated, dict)


def test_comparison_confirms_contradicts_or_cannot_tell() -> None:
    stated = {"max_num_seqs": 8, "uvicorn_log_level": "warning", "enable_log_requests": True}
    assert compare(stated, {"max-num-seqs": 8}).state == CONFIRMED
    assert compare(stated, {"max-num-seqs": 8.0, "uvicorn-log-level": "WARNING"}).state == (
        CONFIRMED
    )
    assert compare(stated, {"enable-log-requests": True}).state == CONFIRMED
    wrong = compare({"max_num_seqs": 16}, {"max-num-seqs": 8})
    assert wrong.state == CONTRADICTED
    assert "max_num_seqs=16, not 8" in wrong.detail
    # vLLM leaves out options equal to its defaults: nothing to compare is not a failure.
    assert compare({}, {"prefill-schedule-interval": 1}).state == UNSTATED


def plan_of(path: Path, old: str, new: str) -> ChangePlan:
    change = FileChange(FileSnapshot(path, True, old, 0o640), new)
    return ChangePlan("a", "p", "0.33", {}, (change,), ("true",), "", {})


@pytest.mark.asyncio
async def test_only_output_after_the_mark_counts(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(REAL_LINE)
    instance = VllmInstance(name="a", url="http://127.0.0.1:1", server_log_file=log)
    plan = plan_of(tmp_path / "a.yaml", "max-num-seqs: 16\n", "max-num-seqs: 8\n")
    mark = log.stat().st_size
    clock = SystemClock()
    # The old start's line is before the mark: a new server that did not state it is unstated.
    assert (await read_back(instance, plan, {"log_mark": mark}, clock)).state == UNSTATED
    with log.open("a") as out:
        out.write(REAL_LINE.replace("'max_num_seqs': 16", "'max_num_seqs': 8"))
    assert (await read_back(instance, plan, {"log_mark": mark}, clock)).state == CONFIRMED
    log.write_text(REAL_LINE)  # rotated: shorter than the mark, read whole
    assert (await read_back(instance, plan, {"log_mark": mark * 2}, clock)).state == CONTRADICTED


@pytest.mark.asyncio
async def test_a_log_command_is_run_without_a_shell_and_unreadable_output_is_said(
    tmp_path: Path,
) -> None:
    (tmp_path / "out.txt").write_text(REAL_LINE)
    plan = plan_of(tmp_path / "a.yaml", "max-num-seqs: 8\n", "max-num-seqs: 16\n")
    clock = SystemClock()
    printing = VllmInstance(
        name="a",
        url="http://127.0.0.1:1",
        unit="vllm.service",
        server_log_command=("cat", str(tmp_path / "out.txt"), "--since={since}"),
    )
    # cat fails on the unknown option: the output counts as unreadable, not as "unstated".
    failed = await read_back(printing, plan, {"restart_at": 1.0}, clock)
    assert failed.state == UNAVAILABLE
    printing = printing.model_copy(
        update={"server_log_command": ("cat", str(tmp_path / "out.txt"))}
    )
    assert (await read_back(printing, plan, {"restart_at": 1.0}, clock)).state == CONFIRMED
    nowhere = VllmInstance(name="a", url="http://127.0.0.1:1")
    assert (await read_back(nowhere, plan, {}, clock)).state == UNAVAILABLE
