"""A backtest governed by the daemon itself: the same Governor as ``run``, other adapters.

The replay is the daemon's own composition (:class:`daemon.engine.governor.Governor`: policies,
evaluator, tick, planner, router, the actuation plane with its runner and journal, approvals)
built in-process on a :class:`~daemon.core.virtual_time.VirtualTimeLoop`. It differs from the
daemon only in what is plugged into its ports:

- **signal feed**: the recording (:class:`~daemon.app.backtest.recorded_feed.RecordedFeed`),
  one evaluation per recorded tick at its recorded moment; no source runs;
- **clock**: the loop's virtual seconds, and the wall-clock time recorded with each tick
  (:class:`~daemon.app.backtest.recorded_feed.RecordedClock`);
- **the vLLM actuator**: the would-have actuator
  (:class:`~daemon.app.backtest.would_have.WouldHaveActuator`), which decides with the
  daemon's preflight and touches nothing;
- **the service manager**: none; no gate, no live log-level actuator, no Slack, no metrics
  endpoint, no recorder; approvals are proposed and never clicked;
- **the what-if**: in process (:data:`~daemon.engine.evaluation.tuner.IN_PROCESS`), its series
  from the recording, which lacks them: a tune round is blocked, saying so.

Everything the governor writes (its state, journal, proposals, control socket) goes to a
scratch directory; freezes are read from the configured state directory. What it decided is
read back from its own records (:mod:`daemon.app.backtest.timeline`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from actuators.kinds import VLLM
from daemon.app.backtest.errors import BacktestError
from daemon.app.backtest.recorded_feed import RecordedClock, RecordedFeed
from daemon.app.backtest.recording import RecordedTick
from daemon.app.backtest.timeline import Event, read_timeline
from daemon.app.backtest.would_have import WouldHaveActuator
from daemon.core.actuator_kinds import ActuatorServices
from daemon.core.errors import TaskCrashedError
from daemon.core.settings import GovernorConfig, VllmInstance
from daemon.core.virtual_time import run_in_virtual_time
from daemon.engine.evaluation.tuner import IN_PROCESS
from daemon.engine.governor import Governor, LoadedConfig
from daemon.engine.runtime.service_manager import NoServiceManager
from daemon.engine.storage.state_db import STATE_FILE

# Virtual seconds the governor runs on after the last tick, so that the actuation runner takes
# the changes that tick queued before the governor stops. Nothing is evaluated meanwhile.
_SETTLE_S = 1.0
# Memory where there is some: the governor's stores sync every write to disk (synchronous=FULL),
# which a state thrown away after the replay does not need. Short: sockets take 107 bytes.
# TemporaryDirectory makes a private directory (mode 0700) with a random name in either.
_SCRATCH_DIRS = (Path("/dev/shm"), Path("/tmp"))  # noqa: S108


def replay(config: GovernorConfig, policies: Path, ticks: Sequence[RecordedTick]) -> list[Event]:
    """Every decision the governor would have taken over ``ticks`` with ``policies``, in order.

    Raises:
        BacktestError: the governor stopped by itself (a task crashed).
    """
    with scratch_directory() as scratch:
        root = Path(scratch)
        governed = governed_config(config, policies, root, [*_recorded_targets(ticks)])
        feed = run_in_virtual_time(_govern(governed, root, config.governor.state_dir, ticks))
        return read_timeline(governed.governor.state_dir / STATE_FILE, feed.ticks)


def scratch_directory() -> tempfile.TemporaryDirectory[str]:
    """Where the governor of a backtest keeps what it writes, removed afterwards."""
    where = next((path for path in _SCRATCH_DIRS if path.is_dir()), None)
    return tempfile.TemporaryDirectory(prefix="vg-bt-", dir=where)


def governed_config(
    config: GovernorConfig, policies: Path, root: Path, targets: Sequence[str]
) -> GovernorConfig:
    """``config`` with ``policies``, its writes under ``root``, nothing that reaches out.

    Recorded ``targets`` the configuration does not name are observed-only servers, as the
    daemon would have them without a ``config_path``.
    """
    state_dir = root / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    named = set(config.target_names())
    # An address nobody is asked at: no source runs in a backtest.
    observed = [VllmInstance(name=name, url="http://127.0.0.1:9") for name in targets]
    sources = config.sources.all_disabled()
    return config.model_copy(
        update={
            "governor": config.governor.model_copy(
                update={"state_dir": state_dir, "policy_dirs": (policies,)}
            ),
            "control": config.control.model_copy(update={"socket_path": root / "control.sock"}),
            "metrics": config.metrics.model_copy(update={"enabled": False}),
            "slack": config.slack.model_copy(update={"enabled": False}),
            "recording": config.recording.model_copy(update={"enabled": False}),
            "sources": sources,
            "vllm": (*config.vllm, *(i for i in observed if i.name not in named)),
        }
    )


def _recorded_targets(ticks: Sequence[RecordedTick]) -> dict[str, None]:
    seen: dict[str, None] = {}
    for tick in ticks:
        seen.update(dict.fromkeys(tick.views))
    return seen


async def _govern(
    config: GovernorConfig, root: Path, freezes: Path, ticks: Sequence[RecordedTick]
) -> RecordedFeed:
    loop = asyncio.get_running_loop()
    feed = RecordedFeed(ticks)
    clock = RecordedClock(loop, feed)

    def actuator(services: ActuatorServices) -> WouldHaveActuator:
        return WouldHaveActuator(services.journal, services.clock, freezes, feed.knobs)

    loaded = LoadedConfig(config, root / "config.toml", clock.wall())
    # The daemon's table of kinds, with the vLLM actuator's place taken: no gate (no admission
    # loop), no live log levels (their intents are blocked as not actuated, as without them).
    kinds = (replace(VLLM, factory=actuator),)
    # A tune round runs in process, taking no virtual time (a worker process would run in real
    # time while the clock jumps); the recording says what it lacks (RecordedFeed.series).
    governor = Governor(
        loaded, clock, NoServiceManager(), kinds=kinds, feed=feed, whatif=IN_PROCESS
    )
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(governor.run(), name="governor")
            await feed.finished.wait()
            await asyncio.sleep(_SETTLE_S)
            governor.request_stop()
    except* TaskCrashedError as crashed:
        message = f"the governor stopped during the backtest: {crashed.exceptions[0]}"
        raise BacktestError(message) from None
    return feed
