"""vLLM's log level, a variable of the unit's environment file: changed through a restart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, ChangeRequest, SystemClock
from daemon.engine.storage.journal_store import SqliteJournal
from tests.real_vllm.test_b_actuation import instance_of
from tests.support.live_windows import live_windows
from tests.support.real_vllm import RealVllm

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(900)]


def vllm_lines(text: str, level: str) -> list[str]:
    """vLLM's own lines at ``level``: "(APIServer pid=N) INFO 12-01 15:03:14 [file.py:12] ..."."""
    return re.findall(rf"^\(APIServer pid=\d+\) {level} .*$", text, re.MULTILINE)


@pytest.mark.asyncio
async def test_warning_level_is_written_restarted_and_seen_in_the_servers_output(
    server: RealVllm, short_tmp: Path
) -> None:
    instance = instance_of(server)
    assert "VLLM_LOGGING_LEVEL=INFO" in server.env_file.read_text()
    assert vllm_lines(server.output(), "INFO"), "at INFO, vLLM says what it does"
    [old_pid, *_] = re.findall(r"\(APIServer pid=(\d+)\)", server.output())[::-1]
    mark = len(server.output())
    spawns = server.spawns()
    journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
    async with live_windows(instance) as windows:
        actuator = VllmActuator(journal, windows, SystemClock(), short_tmp)
        request = ChangeRequest("real", "test", {"log_level": 30}, {"log_level": 20}, reason="t")
        result = await actuator.apply(instance, request)
    assert result.state == DONE, result.outcome
    assert "VLLM_LOGGING_LEVEL=WARNING" in server.env_file.read_text()
    assert server.spawns() == spawns + 1
    # The new process speaks at WARNING (its start-up warnings) and no longer at INFO; the old
    # one said INFO to the end (its shutdown), and earlier ones before the mark.
    after = "\n".join(
        line
        for line in server.output()[mark:].splitlines()
        if f"(APIServer pid={old_pid})" not in line
    )
    assert vllm_lines(after, "WARNING"), after[-3000:]
    assert vllm_lines(after, "INFO") == [], vllm_lines(after, "INFO")[:3]
    assert result.entry_id is not None
    entry = journal.entry(result.entry_id)
    assert entry is not None
    # The level lives in the environment file, which the start-up line does not state (and
    # at WARNING the line itself is gone): the read-back says it cannot tell, and no more.
    assert entry.facts["read_back"]["state"] == "unstated"
    journal.close()
