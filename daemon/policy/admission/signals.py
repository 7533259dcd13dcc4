"""What every admission controller reads, returns and must respect.

:class:`AdmissionSignals` is one tick's view of one gate and the vLLM instance behind it,
filled by the engine's shell from the signal store: a field is None when its series is stale
or missing, and a controller that needs it holds. :class:`Step` is what a controller returns.
:func:`decide` is the one exit every controller goes through: it clamps the cap into the
bounds and turns "the same cap again" into a hold, so a caller writes to the gate only when
something changes.

The limiters of the literature update once per request (an RTT sample, the requests in flight,
and whether the request was dropped). Here they update once per tick with the same three
things aggregated over the tick's window, as Netflix's ``WindowedLimit`` feeds them:

- the **latency** is vLLM's own time to first token over the window (``latency_s``). It
  leaves out the wait at the gate: a limiter must measure what happens inside its limit, or
  lowering the cap would lengthen the queue, raise the latency and lower the cap again. TTFT
  rather than end-to-end latency, because a completion's length is set by its client and says
  nothing about congestion, while TTFT grows with the scheduler's queue and prefill contention;
- a **drop** is lost work inside vLLM: a preemption (recomputed KV, the cache's packet loss)
  or a request refused or failed by vLLM (``vllm_errors_per_s``);
- **in flight** is the sessions HAProxy has open to vLLM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar, Generic, NamedTuple, Protocol, TypeVar

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class AdmissionSignals:
    """One tick's signals of one gate and its vLLM instance; None is stale or missing.

    Attributes:
        cap: The cap in force, read back from the gate (``haproxy_server_maxconn``).
        in_flight: Requests past the gate, inside vLLM (``haproxy_sessions_current``).
        queued: Requests waiting at the gate (``haproxy_queue_current``).
        latency_s: TTFT inside vLLM over the window, p50 (``ttft_p50_s``): the limiters' RTT.
        ttft_p95_s: TTFT inside vLLM over the window, p95 (``ttft_p95_s``).
        tpot_p95_s: Each finished request's mean time per output token over the window, p95
            (``request_tpot_p95_s``): the TPOT a per-request SLO judges.
        preemptions_per_s: vLLM's preemptions per second (``preemptions_per_s``).
        vllm_errors_per_s: Requests vLLM refused or failed per second (its own admission
            refusals and error finishes), the other half of a drop.
        gate_refusals_per_s: The gate's 503s per second (queue timeouts): SLO misses caused
            by a cap too low for the demand (``haproxy_backend_http_5xx_total`` as a rate).
        gate_admitted_per_s: The requests the gate let through to vLLM per second
            (``haproxy_sessions_total`` as a rate).
        gen_tokens_per_s: The tokens vLLM generated per second over the window.
    """

    cap: float | None = None
    in_flight: float | None = None
    queued: float | None = None
    latency_s: float | None = None
    ttft_p95_s: float | None = None
    tpot_p95_s: float | None = None
    preemptions_per_s: float | None = None
    vllm_errors_per_s: float | None = None
    gate_refusals_per_s: float | None = None
    gate_admitted_per_s: float | None = None
    gen_tokens_per_s: float | None = None

    def missing(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """Which of ``names`` are None (or not finite: never act on NaN)."""
        return tuple(
            name
            for name in names
            if (value := getattr(self, name)) is None or not math.isfinite(value)
        )

    def known(self, names: tuple[str, ...]) -> dict[str, float] | None:
        """The values of ``names``, or None when any of them is missing."""
        if self.missing(names):
            return None
        return {name: float(getattr(self, name)) for name in names}


SIGNAL_NAMES = tuple(field.name for field in fields(AdmissionSignals))

# The window of the rates and quantiles a controller reads unless it says otherwise: the one
# the baselines were measured with in the simulator, and the policies' own default window.
DEFAULT_WINDOW_S = 60.0


class Step(NamedTuple, Generic[S]):
    """What one tick of a controller concluded.

    Attributes:
        state: The controller's state after the tick.
        cap: The cap to set at the gate, within the bounds; None: leave the gate as it is.
        reason: Why, in one line, for the decision record.
    """

    state: S
    cap: int | None
    reason: str


class AdmissionController(Protocol[S]):
    """A pure controller of one gate's cap."""

    needs: ClassVar[tuple[str, ...]]  # the signals it cannot act without

    @property
    def min_cap(self) -> int:
        """The lowest cap it may set."""
        ...

    @property
    def max_cap(self) -> int:
        """The highest cap it may set: vLLM's ``max-num-seqs``."""
        ...

    @property
    def window_s(self) -> float:
        """The window, in seconds, of the rates and quantiles its signals are read over.

        The controller's pacing is designed around it (slo-band settles for one window after
        a cut), so the loop that feeds it reads over this window and no other.
        """
        ...

    def initial_state(self) -> S:
        """The state before the first tick."""
        ...

    def step(self, state: S, signals: AdmissionSignals, now: float) -> Step[S]:
        """One tick: the next state and the cap to set (None: hold)."""
        ...


# What a limiter of the literature reads when it reacts to drops as well as latency (AIMD,
# Vegas): the cap, the requests in flight, the latency and the two halves of a drop.
DROP_AND_LATENCY_NEEDS = (
    "cap",
    "in_flight",
    "latency_s",
    "preemptions_per_s",
    "vllm_errors_per_s",
)


def dropped(known: dict[str, float]) -> bool:
    """Whether the window saw a drop: a preemption or a request vLLM refused or failed.

    ``known`` holds the values of :data:`DROP_AND_LATENCY_NEEDS` (see the module docstring for
    why these two are the limiters' packet loss).
    """
    return known["preemptions_per_s"] > 0 or known["vllm_errors_per_s"] > 0


def check_controller(min_cap: int, max_cap: int, window_s: float) -> None:
    """Refuse what no controller can work with: bounds no gate can keep, a window of nothing.

    Every controller's ``__post_init__`` starts here, before checking its own parameters.
    """
    check_bounds(min_cap, max_cap)
    check_window(window_s)


def check_window(window_s: float) -> None:
    """Refuse a window that holds no sample: rates and quantiles need a positive one."""
    if not (math.isfinite(window_s) and window_s > 0):
        message = f"the signal window must be a positive number of seconds, not {window_s}"
        raise ValueError(message)


def check_bounds(min_cap: int, max_cap: int) -> None:
    """Refuse bounds no gate can keep: the cap is at least 1 and ``min_cap <= max_cap``."""
    if not 1 <= min_cap <= max_cap:
        message = (
            f"admission cap bounds must satisfy 1 <= min_cap <= max_cap, not {min_cap}..{max_cap}"
        )
        raise ValueError(message)


def clamp(value: float, min_cap: int, max_cap: int) -> int:
    """``value`` rounded down to a whole cap inside ``[min_cap, max_cap]``."""
    if not math.isfinite(value):
        return max_cap if value > 0 else min_cap
    return max(min_cap, min(max_cap, math.floor(value)))


def hold(state: S, reason: str) -> Step[S]:
    """Leave the gate as it is."""
    return Step(state, None, f"hold: {reason}")


def hold_without(state: S, missing: tuple[str, ...]) -> Step[S]:
    """Hold because signals are stale or missing; the state stays as it was."""
    return hold(state, f"no fresh {', '.join(missing)}")


def decide(
    state: S, current: float, target: float, reason: str, *, min_cap: int, max_cap: int
) -> Step[S]:
    """The cap for ``target`` inside the bounds; a hold when that is the cap in force."""
    cap = clamp(target, min_cap, max_cap)
    if cap == current:
        return Step(state, None, f"hold at {cap}: {reason}")
    return Step(state, cap, f"{int(current)} -> {cap}: {reason}")
