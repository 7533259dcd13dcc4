"""``whatif`` on the control socket: copy the series here, do the rest in a worker process.

Only the copy of the instance's series over the window happens on the loop (a few
milliseconds); characterising them and simulating every candidate (seconds of CPU) happen in
a worker process (:func:`daemon.whatif.worker.plan_off_loop`), one round at a time: a second
caller waits for the first round to end rather than doubling the CPU the what-if takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from daemon.core.clock import Clock
from daemon.core.control_protocol import ControlRequest
from daemon.core.errors import ControlError
from daemon.core.settings import GovernorConfig
from daemon.engine.runtime.control_server import Caller
from daemon.sources.store import SignalStore
from daemon.whatif.errors import WhatIfError
from daemon.whatif.prediction import Slo
from daemon.whatif.requests import DEFAULT_PROFILE, Question
from daemon.whatif.rounds import Round
from daemon.whatif.series_snapshot import snapshot
from daemon.whatif.worker import plan_off_loop

DEFAULT_WINDOW_S = 600.0


class WhatIfDesk:
    """Answers ``whatif`` requests from the store and the settings in force."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        store: SignalStore,
        knobs: Callable[[], Mapping[str, Mapping[str, float]]],
        clock: Clock,
    ) -> None:
        self._config = config
        self._store = store
        self._knobs = knobs
        self._clock = clock
        self._one_at_a_time = asyncio.Lock()

    async def handle(self, request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        """Plan for ``target`` over ``window_s``; args as :func:`question_of` reads them."""
        target = request.args.get("target")
        instance = next((i for i in self._config().vllm if i.name == target), None)
        if instance is None:
            names = ", ".join(i.name for i in self._config().vllm) or "none"
            message = f"no [[vllm]] instance named {target!r} (configured: {names})"
            raise ControlError(message)
        window_s = _number(request.args, "window_s", DEFAULT_WINDOW_S)
        question = question_of(request.args)
        async with self._one_at_a_time:
            now = self._clock.monotonic()
            job = Round(
                instance=instance,
                series=snapshot(self._store, instance.name, now - window_s),
                now=now,
                window_s=window_s,
                in_force=dict(self._knobs().get(instance.name, {})),
                question=question,
            )
            try:
                report = await plan_off_loop(job)
            except WhatIfError as exc:
                raise ControlError(str(exc)) from exc
        return report.to_json()


def question_of(args: Mapping[str, Any]) -> Question:
    """The person's choices from a request's args (absent ones take the defaults).

    Raises:
        ControlError: an arg of the wrong type or out of range.
    """
    profile = args.get("profile") or DEFAULT_PROFILE
    if not isinstance(profile, str):
        message = "'profile' must be a profile name or file"
        raise ControlError(message)
    defaults = Question()
    return Question(
        profile=profile,
        slo=Slo(
            ttft_s=_number(args, "ttft_slo_s", defaults.slo.ttft_s),
            tpot_s=_number(args, "tpot_slo_s", defaults.slo.tpot_s),
        ),
        simulated_s=_number(args, "simulated_s", defaults.simulated_s),
        horizon_s=_number(args, "horizon_s", defaults.horizon_s),
        min_gain=_number(args, "min_gain", defaults.min_gain, least=0.0),
    )


def _number(args: Mapping[str, Any], name: str, default: float, *, least: float = 1e-9) -> float:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= least:
        message = f"{name!r} must be a number of at least {least:g}, not {value!r}"
        raise ControlError(message)
    return float(value)
