"""``sim supervise`` and ``sim restart``: real child processes under the tiny service manager."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from simulator.server.supervisor import Supervisor
from simulator.server.supervisor_client import SupervisorError, ask_supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@asynccontextmanager
async def supervising(supervisor: Supervisor, socket_path: Path) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run(stop))
    for _ in range(100):
        if socket_path.exists() and supervisor.spawns:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # past the first start's start_s
    try:
        yield stop
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


async def ask(socket_path: Path, request: str) -> dict[str, Any]:
    return await asyncio.to_thread(ask_supervisor, socket_path, request, 30.0)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.asyncio
async def test_restart_replaces_the_process_and_stop_leaves_nothing(short_tmp: Path) -> None:
    sock = short_tmp / "s.sock"
    supervisor = Supervisor(SLEEPER, sock, stop_timeout_s=5, start_s=0.2)
    async with supervising(supervisor, sock):
        before = await ask(sock, "status")
        assert before["running"]
        assert before["spawns"] == 1
        after = await ask(sock, "restart")
        assert after["spawns"] == 2
        assert after["running"]
        assert after["pid"] != before["pid"]
        assert not alive(before["pid"]), "the old process was stopped"
        assert oct(sock.stat().st_mode & 0o777) == "0o600"
    assert not alive(after["pid"]), "stopping the supervisor stops its program"
    assert not sock.exists()


@pytest.mark.asyncio
async def test_a_program_that_exits_on_its_own_is_started_again(short_tmp: Path) -> None:
    sock = short_tmp / "s.sock"
    marker = short_tmp / "runs"
    # Exits at once the first time, then stays up.
    program = [
        sys.executable, "-c",
        f"import pathlib, time; p = pathlib.Path({str(marker)!r}); n = len(p.read_text()) "
        "if p.exists() else 0; p.write_text('x' * (n + 1)); time.sleep(0 if n == 0 else 120)",
    ]  # fmt: skip
    supervisor = Supervisor(program, sock, stop_timeout_s=5, start_s=0.0)
    async with supervising(supervisor, sock):
        for _ in range(100):
            if supervisor.spawns == 2:
                break
            await asyncio.sleep(0.05)
        status = await ask(sock, "status")
        assert status["spawns"] == 2
        assert status["unexpected_exits"] == 1
        assert status["running"]


@pytest.mark.asyncio
async def test_a_restart_into_a_failing_program_fails_and_says_so(short_tmp: Path) -> None:
    sock = short_tmp / "s.sock"
    marker = short_tmp / "broken"
    program = [
        sys.executable, "-c",
        f"import pathlib, sys, time; sys.exit(3) if pathlib.Path({str(marker)!r}).exists() "
        "else time.sleep(120)",
    ]  # fmt: skip
    supervisor = Supervisor(program, sock, stop_timeout_s=5, start_s=0.5)
    async with supervising(supervisor, sock):
        marker.write_text("a broken config")
        with pytest.raises(SupervisorError, match=r"exited at start \(status 3\)"):
            await ask(sock, "restart")
        with pytest.raises(SupervisorError, match="unknown request 'reload'"):
            await ask(sock, "reload")
        marker.unlink()
        assert (await ask(sock, "restart"))["running"]
        assert supervisor.spawns == 3


@pytest.mark.asyncio
async def test_it_stops_starting_a_program_that_keeps_failing_soon_after_start(
    short_tmp: Path,
) -> None:
    sock = short_tmp / "s.sock"
    flaky = [sys.executable, "-c", "import sys, time; time.sleep(0.3); sys.exit(4)"]
    supervisor = Supervisor(flaky, sock, stop_timeout_s=5, start_s=0.1)
    async with supervising(supervisor, sock):
        for _ in range(200):
            if supervisor.unexpected_exits >= 3:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)  # longer than the respawn delay: no fourth start
        status = await ask(sock, "status")
        assert status["unexpected_exits"] == 3
        assert status["spawns"] == 3
        assert not status["running"]


@pytest.mark.asyncio
async def test_a_program_deaf_to_sigterm_is_killed_after_the_stop_timeout(short_tmp: Path) -> None:
    sock = short_tmp / "s.sock"
    deaf = [
        sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
    ]  # fmt: skip
    supervisor = Supervisor(deaf, sock, stop_timeout_s=0.5, start_s=0.3)
    async with supervising(supervisor, sock):
        before = await ask(sock, "status")
        after = await ask(sock, "restart")
        assert not alive(before["pid"])
    assert not alive(after["pid"])


@pytest.mark.asyncio
async def test_each_start_reads_the_environment_file_afresh(short_tmp: Path) -> None:
    sock, env_file, seen = short_tmp / "s.sock", short_tmp / "vllm.env", short_tmp / "seen"
    env_file.write_text("# as systemd reads it\nVLLM_LOGGING_LEVEL=INFO\n")
    # Appends the level it was started with, then stays up.
    program = [
        sys.executable, "-c",
        f"import os, time; open({str(seen)!r}, 'a').write(os.environ['VLLM_LOGGING_LEVEL'] "
        "+ ' '); time.sleep(120)",
    ]  # fmt: skip
    supervisor = Supervisor(program, sock, stop_timeout_s=5, start_s=0.2, env_file=env_file)
    async with supervising(supervisor, sock):
        env_file.write_text('export VLLM_LOGGING_LEVEL="WARNING"\n')
        assert (await ask(sock, "restart"))["running"]
    assert seen.read_text().split() == ["INFO", "WARNING"]


def test_sim_restart_without_a_supervisor_exits_1_and_says_where(short_tmp: Path) -> None:
    sock = short_tmp / "nothing.sock"
    done = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "sim", "restart", "--socket", str(sock)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"no supervisor listens on {sock}" in done.stderr
