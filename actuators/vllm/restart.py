"""Running the configured restart command: an argument list, executed directly, never a shell.

``systemctl restart vllm@main.service`` by default, ``supervisorctl restart NAME`` where
supervisord manages vLLM; the command comes from ``config.toml`` with only ``{unit}``
substituted (:meth:`VllmInstance.restart_argv`). There is no shell, so no configured string can
expand, glob, chain or redirect. The command is bounded by ``restart_timeout_s``; on a timeout or
on cancellation it is killed and reaped, never left behind.

A restart must survive the governor's own death half-way: ``supervisorctl restart`` stops, then
starts, from the client, and a client writing to a pipe whose reader died gets SIGPIPE between
the two, leaving the server down. So the command writes to a file, not a pipe, and runs in a
session of its own, out of reach of signals sent to the governor's process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from daemon.api import Clock

_OUTPUT_LIMIT = 4000


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How the restart command ended.

    Attributes:
        argv: The arguments run.
        returncode: Its exit status; None when it could not start or ran out of time.
        output: The end of what it printed (stdout and stderr together).
        seconds: How long it ran.
    """

    argv: tuple[str, ...]
    returncode: int | None
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether it exited 0."""
        return self.returncode == 0


# How the restart command is run: argv, timeout, clock -> how it ended. On a host that is
# :func:`run_command`; ``simulate`` plugs in its simulated host, which restarts the engine.
CommandRunner = Callable[[Sequence[str], float, Clock], Awaitable["CommandResult"]]


async def run_command(
    argv: Sequence[str],
    timeout_s: float,
    clock: Clock,
    env: Mapping[str, str] | None = None,
    *,
    output_limit: int = _OUTPUT_LIMIT,
) -> CommandResult:
    """Run ``argv`` with no shell and no input, up to ``timeout_s`` seconds.

    ``output`` keeps the last ``output_limit`` characters of what it printed.
    """
    arguments = tuple(argv)
    started = clock.monotonic()
    with tempfile.TemporaryFile() as output:
        try:
            process = await asyncio.create_subprocess_exec(
                *arguments,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                env=None if env is None else dict(env),
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(arguments, None, f"cannot run {arguments[0]}: {exc}", 0.0)
        try:
            async with asyncio.timeout(timeout_s):
                await process.wait()
        except TimeoutError:
            await _kill(process)
            took = clock.monotonic() - started
            return CommandResult(arguments, None, f"killed after {timeout_s:g} s", took)
        except asyncio.CancelledError:
            await _kill(process)
            raise
        output.seek(0)
        text = output.read().decode("utf-8", errors="replace")[-output_limit:]
    return CommandResult(arguments, process.returncode, text, clock.monotonic() - started)


async def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    # Reaping is quick after SIGKILL; shield it so that a second cancellation cannot orphan it.
    await asyncio.shield(process.wait())
