"""A virtual run seen as a host: one vLLM process at a time, served over loopback like a real one.

``simulate`` computes the workload, the gate and the engine in virtual time
(:class:`~simulator.virtual_time.VirtualRun`); the governor it runs is the daemon's own
composition, which knows a server only from the outside. :class:`VirtualHost` gives it that
outside, on the same virtual-time loop:

- **Now.** Every look brings the run up to the loop's clock first (:meth:`VirtualHost.sync`),
  so what a scrape or a probe sees is the engine at that moment; run time 0 is loop time 0.
- **A process per incarnation.** Each time the engine comes up (at start and after every
  restart) is a new process: its counters and histograms start at zero, and
  ``process_start_time_seconds`` is the moment it began serving, on the governor's wall clock
  (``epoch`` plus run seconds). That is how the governor tells one process from the next.
- **Its output.** Each process states its options in the log file, in vLLM's start-up line
  (``non-default args: {...}``), where the governor reads back what a restart applied.
- **Answers on time.** A client's own request (the batch lane's) is answered when the step
  that ends it ends, on the loop's clock: while one is unanswered, the host looks again at the
  end of the run's last computed step, not only when somebody else looks.
- **Restart and settings.** :meth:`VirtualHost.restart` restarts the engine into the settings
  the host's vLLM config file says now, read as ``sim serve`` reads it: the governor's own
  actuator wrote that file.

The HTTP face (:mod:`simulator.server.virtual_face`) and the HAProxy runtime socket
(:mod:`simulator.server.virtual_haproxy`) read and act through this class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from simulator.engine import Phase
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Request
from simulator.server.metrics import VllmMetrics
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.spec_files import load_mapping
from simulator.steps import StepResult
from simulator.virtual_time import VirtualRun
from simulator.vllm_config import load_vllm_config

# The least time between two looks for answers: a run with no step in progress (all waiting
# elsewhere) is looked at again after this.
ANSWER_LOOK_S = 0.005


class _RunNow:
    """The engine's time for the metrics: the run's own clock."""

    def __init__(self, run: VirtualRun) -> None:
        self._run = run

    def now(self) -> float:
        return self._run.now


class VirtualHost:
    """One simulated vLLM server on a virtual-time loop.

    Args:
        run: The run; the host becomes its observer (every step and record of the engine).
        profile: The engine's profile (to read the config file with).
        config_path: The server's vLLM config file (``--config``).
        epoch: Unix seconds at run time 0 (the governor's wall clock there).
        log_path: The server's log file (appended to).
    """

    def __init__(
        self,
        run: VirtualRun,
        profile: EngineProfile,
        config_path: Path,
        epoch: float,
        log_path: Path,
    ) -> None:
        self.run = run
        run.observer = self
        self.profile = profile
        self.config_path = config_path
        self.epoch = epoch
        self.log_path = log_path
        self.restarts = 0
        self._incarnation: object | None = None
        self._metrics: VllmMetrics | None = None
        self._started_at = epoch
        self._now = _RunNow(run)
        # Requests sent to the host itself (not the run's workload), until their record.
        self._answers: dict[str, asyncio.Future[FinishedRequest]] = {}
        self._watching = False
        self._sent = 0
        self._roll()

    # -- the run's observer -------------------------------------------------------------

    def step(self, result: StepResult) -> None:
        """An engine step ended: into the histograms of the process that ran it."""
        self._roll()
        if self._metrics is not None:
            self._metrics.observe_step(result)

    def finished(self, record: FinishedRequest) -> None:
        """A request left the engine: counted by the process it ended in."""
        if self._metrics is not None:
            self._metrics.observe_finished(record, record.finished_reason or "abort")
        answer = self._answers.pop(record.request_id, None)
        if answer is None or answer.done():
            return
        # The run computes a step whole, so a record may come out before the loop's clock
        # reaches its end: the client hears of it at its end.
        loop = asyncio.get_running_loop()
        if record.finished_at > loop.time():
            loop.call_at(record.finished_at, _answer, answer, record)
        else:
            answer.set_result(record)

    # -- a client's own requests --------------------------------------------------------

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        *,
        priority: int,
        token_ids: Sequence[int] = (),
    ) -> tuple[Request | None, asyncio.Future[FinishedRequest]]:
        """A client's request arrives now: the request in the engine, and its record to come.

        The request is None when the engine refused it at once (down, or too long); its
        record still comes, at the next :meth:`sync`. ``token_ids`` (the prompt's, where the
        client sent them) name its blocks for the prefix cache.
        """
        self.sync()
        self._sent += 1
        request_id = f"client-{self._sent}"
        answer: asyncio.Future[FinishedRequest] = asyncio.get_running_loop().create_future()
        self._answers[request_id] = answer
        request = self.run.engine.submit(
            prompt_tokens,
            max_tokens,
            self.run.now,
            request_id,
            priority=priority,
            token_ids=token_ids,
        )
        self._watch_answers()
        return request, answer

    def _watch_answers(self) -> None:
        """While a client's request is unanswered, look again when the run's next step ends.

        A real server answers as soon as the step that ends a request ends; without this the
        answer would wait for whoever looks next (a scrape, a tick), and a client that sends
        its requests one after another (the lane's prefill pieces) would lose that wait each.
        """
        if self._watching or not self._answers:
            return
        self._watching = True
        loop = asyncio.get_running_loop()
        loop.call_at(max(self.run.now, loop.time() + ANSWER_LOOK_S), self._look)

    def _look(self) -> None:
        self._watching = False
        self.sync()
        self._watch_answers()

    def abort(self, request: Request) -> None:
        """The client went away: vLLM aborts its request (its record comes out as aborted)."""
        self.sync()
        self.run.engine.abort(request, self.run.now)
        self.sync()

    # -- what the outside sees ----------------------------------------------------------

    def sync(self) -> None:
        """Bring the run up to the loop's clock (the caller runs on that loop)."""
        self.run.run_until(asyncio.get_running_loop().time())
        self._roll()

    @property
    def serving(self) -> bool:
        """Whether a process is up (serving or draining), after :meth:`sync`."""
        return self.run.engine.phase in (Phase.SERVING, Phase.DRAINING)

    @property
    def metrics(self) -> VllmMetrics | None:
        """The metrics of the process up now, None between processes."""
        return self._metrics if self.serving else None

    @property
    def process_start(self) -> float:
        """When the process up now began serving (Unix seconds)."""
        return self._started_at

    @property
    def settings(self) -> EngineSettings:
        """The settings in force (or coming, while the engine restarts)."""
        return self.run.engine.settings

    def restart(self) -> None:
        """Restart now into what the config file says (as ``systemctl restart`` would).

        Raises:
            SpecError: the file is one vLLM would refuse (nothing was restarted).
            RuntimeError: the engine is not serving (a restart is already under way).
        """
        self.sync()
        settings = load_vllm_config(self.config_path, self.profile)
        self.run.restart(settings)
        self.restarts += 1

    def _roll(self) -> None:
        """A new incarnation of the engine is a new process: fresh metrics, a new start time."""
        incarnation = self.run.engine.scheduler
        if incarnation is None or incarnation is self._incarnation:
            return
        self._incarnation = incarnation
        self._started_at = self.epoch + self.run.now
        self._metrics = VllmMetrics(self.run.engine, self._now, created=self._started_at)
        document, _ = load_mapping(self.config_path)
        given = {str(key).replace("-", "_"): value for key, value in document.items()}
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"INFO [simulated] non-default args: {given!r}\n")


def _answer(answer: asyncio.Future[FinishedRequest], record: FinishedRequest) -> None:
    if not answer.done():
        answer.set_result(record)


def engine_settings_yaml(settings: EngineSettings) -> str:
    """A vLLM ``--config`` file for ``settings``: the knobs a governor reads and moves."""
    lines = [
        f"served-model-name: {settings.served_model_name}",
        f"max-num-seqs: {settings.max_num_seqs}",
        f"max-num-batched-tokens: {settings.max_num_batched_tokens}",
    ]
    if settings.scheduling_policy is not SchedulingPolicy.FCFS:
        lines.append(f"scheduling-policy: {settings.scheduling_policy.value}")
    if settings.shutdown_timeout:
        lines.append(f"shutdown-timeout: {settings.shutdown_timeout}")
    return "\n".join(lines) + "\n"
