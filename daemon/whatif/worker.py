"""One planning round in a worker process with a CPU bound, off the daemon's event loop.

The daemon starts ``python -m daemon.whatif.worker LIMIT`` as an asyncio subprocess, writes
the pickled :class:`~daemon.whatif.rounds.Round` to its stdin and reads the pickled
:class:`~daemon.whatif.planning.WhatIfReport` from its stdout; nothing else runs in the
daemon's process meanwhile. The worker bounds its CPU time (an interval timer on it, backed
by ``RLIMIT_CPU``: past the limit the kernel ends it, and the daemon says so) and lowers its
own priority (``nice`` 10, so the daemon's loops win the CPU) where the system allows it: the
governor's systemd unit filters the resource-tuning system calls, and there the round runs at
the daemon's priority. A round that takes too long on the clock anyway
(the machine busy with other work) is killed at ``wall_limit_s``. A cancelled round (the caller
hung up, the daemon is stopping) kills the worker and reaps it. Pickle is safe here: both ends
are this program, over a pipe only they hold. The same worker measures a tuned change's
realised effect (:class:`~daemon.whatif.realised.RealisedCheck`), which reads as much.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import pickle
import resource
import signal
import sys

from daemon.whatif.errors import WhatIfError
from daemon.whatif.planning import WhatIfReport
from daemon.whatif.realised import Realised, RealisedCheck
from daemon.whatif.rounds import Round, run_round

DEFAULT_CPU_LIMIT_S = 120.0
"""CPU seconds one round may take: 34 candidates of 5-minute workloads take 3-9 s."""

DEFAULT_WALL_LIMIT_S = 150.0
"""Seconds one round may take on the clock: the worker runs at a lower priority, and a machine
busy with other work could starve it past any CPU bound. ``whatif`` waits a little longer."""

_PRIORITY = 10
_EXIT_REFUSED = 2


async def plan_off_loop(
    job: Round,
    *,
    cpu_limit_s: float = DEFAULT_CPU_LIMIT_S,
    wall_limit_s: float = DEFAULT_WALL_LIMIT_S,
) -> WhatIfReport:
    """Run :func:`~daemon.whatif.rounds.run_round` in a worker process (module docstring).

    Raises:
        WhatIfError: the worker refused the request, ran past its CPU or wall-clock bound, or
            failed.
    """
    report = await _off_loop(job, cpu_limit_s, wall_limit_s)
    if not isinstance(report, WhatIfReport):
        message = f"the what-if worker answered a {type(report).__name__}, not a report"
        raise WhatIfError(message)
    return report


async def measure_off_loop(
    check: RealisedCheck,
    *,
    cpu_limit_s: float = DEFAULT_CPU_LIMIT_S,
    wall_limit_s: float = DEFAULT_WALL_LIMIT_S,
) -> Realised:
    """Measure a tuned change's realised effect in a worker process, as a round is planned.

    Raises:
        WhatIfError: too little data, or the worker failed or ran past its bounds.
    """
    realised = await _off_loop(check, cpu_limit_s, wall_limit_s)
    if not isinstance(realised, Realised):
        message = f"the what-if worker answered a {type(realised).__name__}, not a measurement"
        raise WhatIfError(message)
    return realised


async def _off_loop(job: Round | RealisedCheck, cpu_limit_s: float, wall_limit_s: float) -> object:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "daemon.whatif.worker",
        str(cpu_limit_s),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(wall_limit_s):
            out, err = await process.communicate(pickle.dumps(job))
    except TimeoutError as exc:
        message = (
            f"the what-if took longer than {wall_limit_s:g} s and was stopped (a busy machine?)"
        )
        raise WhatIfError(message) from exc
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    code = process.returncode
    if code == 0:
        answer: object = pickle.loads(out)  # noqa: S301 - our own child, over our own pipe
        return answer
    said = err.decode(errors="replace").strip().splitlines()
    if code == _EXIT_REFUSED and said:
        raise WhatIfError(said[-1])
    if code in (-signal.SIGPROF, -signal.SIGXCPU, -signal.SIGKILL):
        message = f"the what-if ran past its CPU bound of {cpu_limit_s:g} s and was stopped"
        raise WhatIfError(message)
    last = said[-1] if said else "no output"
    message = f"the what-if worker failed (exit {code}): {last}"
    raise WhatIfError(message)


async def plan_in_process(job: Round) -> WhatIfReport:
    """Run a round in this process, on the loop: for runs on a virtual clock only.

    A worker process runs in real time while a :class:`~daemon.core.virtual_time.\
VirtualTimeLoop`'s clock jumps over the wait: its wall-clock bound would pass in no time and
    the round would be stopped. On a virtual clock a round that blocks the loop costs no
    virtual time instead, so the governed run's stages see it take none (``simulate``).

    Raises:
        WhatIfError: as :func:`plan_off_loop`.
    """
    return run_round(job)


async def measure_in_process(check: RealisedCheck) -> Realised:
    """Measure a realised effect in this process: for runs on a virtual clock only."""
    return check()


def main() -> int:
    """The worker's side: bound itself, read the request, plan, write the report."""
    _bound_cpu(float(sys.argv[1]))
    _lower_priority()
    job = pickle.load(sys.stdin.buffer)  # noqa: S301 - the daemon's own request
    try:
        answer = job() if isinstance(job, RealisedCheck) else run_round(job)
    except WhatIfError as exc:
        print(exc, file=sys.stderr)
        return _EXIT_REFUSED
    sys.stdout.buffer.write(pickle.dumps(answer))
    return 0


def _bound_cpu(limit_s: float) -> None:
    """End this process after ``limit_s`` seconds of CPU time, with no privileged system call.

    An interval timer on the process's CPU time (``ITIMER_PROF``) delivers SIGPROF, whose
    default action ends the process; it needs none of the resource-tuning calls the governor's
    unit filters (``SystemCallFilter=~@resources``: setrlimit, setpriority fail with EPERM).
    ``RLIMIT_CPU`` backs it up two seconds later where it can be set (glibc sets it through
    prlimit64, which that filter leaves alone).
    """
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    backstop = math.ceil(limit_s) + 2
    # Where it cannot be set, the interval timer bounds the round on its own.
    with contextlib.suppress(PermissionError, ValueError):
        resource.setrlimit(resource.RLIMIT_CPU, (backstop, backstop + 2))


def _lower_priority() -> None:
    """``nice`` 10, so that the daemon's loops win the CPU, where the system allows it.

    Under the governor's unit ``setpriority`` fails with EPERM; the round then runs at the
    daemon's own priority, bounded in CPU and wall-clock time all the same.
    """
    with contextlib.suppress(PermissionError):
        os.nice(_PRIORITY)


if __name__ == "__main__":
    sys.exit(main())
