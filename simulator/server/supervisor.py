"""``sim supervise``: a tiny service manager that keeps one ``sim serve`` process alive.

A host runs vLLM under systemd; a laptop running the demo has neither systemd nor
supervisord. This stands in for them, for one program only:

- it starts the program (an argument list, never a shell) and starts it again when it
  exits on its own, after a second, unless it failed at start three times in a row (a broken
  config: like systemd's start limit, it then waits for a restart request);
- a ``restart`` request on its Unix socket stops the program (SIGTERM, then SIGKILL after
  ``stop_timeout_s``), starts it again and answers once the new process has stayed up for
  ``start_s`` (like supervisord's ``startsecs``): a program that exits at once makes the
  request fail, as ``systemctl restart`` fails for a unit that does not start;
- each start reads the environment file, if it is given (``--env-file``, as systemd's
  ``EnvironmentFile=``: ``NAME=value`` lines, read afresh at every start, so that a variable
  a governor changed takes effect with the restart; a missing file adds nothing);
- a ``status`` request answers the program's pid and how often it was started;
- SIGTERM or SIGINT stops the program the same way, then the supervisor exits 0.

The socket speaks one line of text per request and one line of JSON per answer
(:mod:`simulator.server.supervisor_client`); it is created ``0600``, so only its owner (and
root) may restart the program.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
# A process that exits sooner than this after its start "failed at start".
_EARLY_EXIT_S = 5.0
_START_LIMIT = 3
_RESPAWN_DELAY_S = 1.0

log = logging.getLogger("simulator.supervisor")


class Supervisor:
    """Keeps one program running and restarts it on request.

    Args:
        command: The program and its arguments.
        socket_path: Where to listen for requests.
        stop_timeout_s: How long a stop waits after SIGTERM before SIGKILL.
        start_s: How long a restarted program must stay up for the restart to succeed.
        env_file: Variables added to the program's environment at each start, or None.
    """

    def __init__(
        self,
        command: Sequence[str],
        socket_path: Path,
        *,
        stop_timeout_s: float = 30.0,
        start_s: float = 0.5,
        env_file: Path | None = None,
    ) -> None:
        self._command = list(command)
        self._env_file = env_file
        self._socket_path = socket_path
        self._stop_timeout_s = stop_timeout_s
        self._start_s = start_s
        self._process: asyncio.subprocess.Process | None = None
        self._started_at = 0.0
        self._early_exits = 0
        # Held while the program is deliberately stopped or started, so that the watcher
        # does not take a requested stop for a crash.
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self.spawns = 0
        self.unexpected_exits = 0

    async def run(self, stop: asyncio.Event | None = None) -> int:
        """Supervise until ``stop`` is set (default: until SIGTERM or SIGINT); the exit status."""
        if stop is None:
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, stop.set)
        self._socket_path.unlink(missing_ok=True)
        previous_umask = os.umask(0o177)  # born 0600: no window for other users
        try:
            server = await asyncio.start_unix_server(self._on_connection, self._socket_path)
        finally:
            os.umask(previous_umask)
        try:
            async with self._lock:
                if not await self._start():
                    log.error("the program failed at its first start: %s", self._command)
            async with asyncio.TaskGroup() as tasks:
                watcher = tasks.create_task(self._watch(), name="program watcher")
                await stop.wait()
                watcher.cancel()
        finally:
            server.close()
            self._socket_path.unlink(missing_ok=True)
            async with self._lock:
                await self._stop()
        log.info("stopped after %d start(s) of the program", self.spawns)
        return EXIT_OK

    def status(self) -> dict[str, Any]:
        """What a ``status`` request answers."""
        process = self._process
        running = process is not None and process.returncode is None
        return {
            "ok": True,
            "pid": process.pid if running and process is not None else None,
            "running": running,
            "spawns": self.spawns,
            "unexpected_exits": self.unexpected_exits,
            "started_at": self._started_at if running else None,
        }

    async def restart(self) -> dict[str, Any]:
        """Stop the program and start it again; the answer to a ``restart`` request."""
        async with self._lock:
            await self._stop()
            self._early_exits = 0
            if not await self._start():
                code = None if self._process is None else self._process.returncode
                return {"ok": False, "error": f"the program exited at start (status {code})"}
        return self.status()

    async def _start(self) -> bool:
        """Start the program; True when it is still up ``start_s`` later."""
        env = None if self._env_file is None else {**os.environ, **self._variables()}
        self._process = await asyncio.create_subprocess_exec(*self._command, env=env)
        self._started_at = time.time()
        self.spawns += 1
        self._changed.set()
        log.info("started the program (pid %d, start %d)", self._process.pid, self.spawns)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._start_s):
                await self._process.wait()
        return self._process.returncode is None

    def _variables(self) -> dict[str, str]:
        assert self._env_file is not None
        try:
            text = self._env_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        return environment_file_variables(text)

    async def _stop(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self._stop_timeout_s):
                await process.wait()
        except TimeoutError:
            log.warning("the program ignored SIGTERM for %.0f s; killing it", self._stop_timeout_s)
            process.kill()
            await process.wait()
        log.info("stopped the program (pid %d, status %s)", process.pid, process.returncode)

    async def _watch(self) -> None:
        """Start the program again when it exits on its own (not when told to stop)."""
        while True:
            process = self._process
            if process is None or process.returncode is not None:
                self._changed.clear()
                await self._changed.wait()
                continue
            await process.wait()
            async with self._lock:
                if process is not self._process:
                    continue  # a restart replaced it meanwhile
                self.unexpected_exits += 1
                lived = time.time() - self._started_at
                self._early_exits = self._early_exits + 1 if lived < _EARLY_EXIT_S else 0
                log.warning("the program exited on its own (status %s)", process.returncode)
                if self._early_exits >= _START_LIMIT:
                    log.error(
                        "the program failed at start %d times in a row; waiting for a restart "
                        "request",
                        self._early_exits,
                    )
                    self._changed.clear()
                    continue
                await asyncio.sleep(_RESPAWN_DELAY_S)
                await self._start()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            line = (await reader.readline()).decode(errors="replace").strip()
            if line == "restart":
                answer = await self.restart()
            elif line == "status":
                answer = self.status()
            else:
                answer = {"ok": False, "error": f"unknown request {line!r} (restart, status)"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except ConnectionError:
            pass  # the client went away; a restart it asked for still completes
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def environment_file_variables(text: str) -> dict[str, str]:
    """The variables of an environment file, as systemd reads the simple cases."""
    variables: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        variables[name.strip()] = value
    return variables


def run_supervisor(supervisor: Supervisor) -> int:
    """Run ``supervisor`` on a new event loop."""
    return asyncio.run(supervisor.run())
