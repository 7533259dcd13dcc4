"""Verifying a change: the server keeps serving for a window, and is not worse than before.

In the spirit of Argo Rollouts' analysis: over ``verify_window_s`` after the server is ready
again, the governor probes it (it must keep serving, in the same process: a refusal or three
probes in a row without an answer in time end it), then compares
what its own signal store measured over that window with what it measured over a window of
the same length before the change:

* ``errors_per_s`` may rise by at most ``verify_max_error_rate_increase``;
* ``ttft_p95_s`` may grow by at most the factor ``verify_max_ttft_p95_ratio``;
* ``preemptions_per_s`` may rise by at most ``verify_max_preemption_rate_increase``.

Behind an admission gate the TTFT compared is the one the gate's clients saw, since a change
of ``max-num-seqs`` moves the wait between the gate and vLLM: a raise lets in requests that
waited at the gate, and vLLM's own TTFT grows while its clients wait less (an 8B server
raised from 32 to 128 sequences: vLLM's TTFT p95 0.085 -> 0.235 s, while the mean wait at the
gate fell from about a second to nothing). Where the window on both sides has the gate's
signal, ``ttft_p95_s`` adds the mean wait at it (``gate_queue_time_s``, HAProxy's ``qtime``: a
mean, not a p95, so the sum stands for a client's TTFT p95 without being one). The gate's 503s
are not counted as errors: they follow the demand, which differs between the two windows, and
a per-second limit made for vLLM's own errors (normally none) reverted a change on the CPU
profile's shifting day whose window met more of the evening's demand (0.44 -> 0.80 a second);
what a change trades in refusals for requests within the SLO is judged by its measured effect
against the what-if's prediction instead.

The governor's own store, not a separate scrape, is the measure: it is what the policies
decided on, it already derives windowed rates and quantiles from histogram buckets and handles
the counter reset of a restart, and its windows before the change cost no waiting. The window
after the change must be covered by fresh data (the counters' rates known), or the change is
not verified. A condition without data on either side (no traffic, so no latency observed) is
recorded as ``no_data`` and does not fail the change: the server served throughout, and there
is no evidence that it got worse. An idle server must not have every change reverted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from actuators.vllm.probes import probe, same_process
from daemon.api import Clock, SignalWindows, VllmInstance

MEASURED = ("errors_per_s", "ttft_p95_s", "preemptions_per_s")
# Behind a gate: the mean wait at it, added to the TTFT its clients saw.
GATE_WAIT = "gate_queue_time_s"
COUNTERS = ("errors_per_s", "preemptions_per_s")
# The longest a source waits between two polls after an outage (its backoff's cap).
SOURCE_CATCH_UP_S = 60.0
OK, WORSE, NO_DATA = "ok", "worse", "no_data"
# What a probe that timed out or was reset says (see probes.Probe), and how many in a row mean
# the server no longer serves.
SLOW = "error"
SLOW_PROBES_TO_FAIL = 3


@dataclass(frozen=True, slots=True)
class Check:
    """One condition, before and after."""

    signal: str
    before: float | None
    after: float | None
    limit: str
    verdict: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a verification."""

    ok: bool
    detail: str
    checks: tuple[Check, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """For the journal."""
        return {"ok": self.ok, "detail": self.detail, "checks": [asdict(c) for c in self.checks]}


def judge(
    before: Mapping[str, float | None], after: Mapping[str, float | None], instance: VllmInstance
) -> Verdict:
    """Compare the windows before and after with the instance's conditions. Pure."""
    before, after = as_clients_saw_it(before, after)
    checks = (
        _increase(
            "errors_per_s", before, after, instance.verify_max_error_rate_increase, "errors/s"
        ),
        _ratio("ttft_p95_s", before, after, instance.verify_max_ttft_p95_ratio),
        _increase(
            "preemptions_per_s",
            before,
            after,
            instance.verify_max_preemption_rate_increase,
            "preemptions/s",
        ),
    )
    worse = [check for check in checks if check.verdict == WORSE]
    if worse:
        detail = "; ".join(
            f"{c.signal} {c.before:g} -> {c.after:g} ({c.limit})"
            for c in worse
            if c.before is not None and c.after is not None
        )
        return Verdict(False, f"worse than before the change: {detail}", checks)
    return Verdict(True, "not worse than before the change", checks)


def as_clients_saw_it(
    before: Mapping[str, float | None], after: Mapping[str, float | None]
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Both windows with the gate's wait added to the TTFT where both have both."""
    seen_before, seen_after = dict(before), dict(after)
    sides = [(side.get("ttft_p95_s"), side.get(GATE_WAIT)) for side in (before, after)]
    if all(ttft is not None and wait is not None for ttft, wait in sides):
        (ttft_before, wait_before), (ttft_after, wait_after) = sides
        seen_before["ttft_p95_s"] = float(ttft_before or 0.0) + float(wait_before or 0.0)
        seen_after["ttft_p95_s"] = float(ttft_after or 0.0) + float(wait_after or 0.0)
    return seen_before, seen_after


def _increase(
    signal: str,
    before: Mapping[str, float | None],
    after: Mapping[str, float | None],
    allowed: float,
    unit: str,
) -> Check:
    old, new = before.get(signal), after.get(signal)
    limit = f"may rise by {allowed:g} {unit}"
    if old is None or new is None:
        return Check(signal, old, new, limit, NO_DATA)
    return Check(signal, old, new, limit, WORSE if new - old > allowed else OK)


def _ratio(
    signal: str, before: Mapping[str, float | None], after: Mapping[str, float | None], ratio: float
) -> Check:
    old, new = before.get(signal), after.get(signal)
    limit = f"may grow {ratio:g}x"
    if old is None or new is None:
        return Check(signal, old, new, limit, NO_DATA)
    return Check(signal, old, new, limit, WORSE if new > old * ratio else OK)


async def verify(
    instance: VllmInstance,
    windows: SignalWindows,
    clock: Clock,
    baseline: Mapping[str, float | None],
    process_start: float | None,
) -> Verdict:
    """Watch the server for the window, then judge it against ``baseline``.

    The window must be covered by fresh signals: after the restart's outage the governor's
    source may come back late (it backs off), so the watch goes on, for at most another window
    and :data:`SOURCE_CATCH_UP_S`, until it is. A change that cannot be measured is not
    verified.
    """
    window = instance.verify_window_s
    interval = max(0.25, min(instance.scrape_interval_s, window / 4))
    started = clock.monotonic()
    after: Mapping[str, float | None] = {}
    slow = 0
    while True:
        elapsed = clock.monotonic() - started
        if elapsed >= window:
            after = windows.measure(instance.name, window)
            if covered(after) or elapsed >= 2 * window + SOURCE_CATCH_UP_S:
                break
        await asyncio.sleep(interval if elapsed >= window else min(interval, window - elapsed))
        seen = await probe(instance.url, instance.scrape_timeout_s + 1.0)
        # A probe that timed out is not a server that stopped: a freshly started vLLM on a
        # busy host answers its first requests slowly. Only a refusal, an unhealthy answer or
        # several slow probes in a row are.
        slow = slow + 1 if seen.state == SLOW else 0
        if not seen.ready and (seen.state != SLOW or slow >= SLOW_PROBES_TO_FAIL):
            return Verdict(False, f"the server stopped serving during verification: {seen.detail}")
        if same_process(seen.process_start, process_start) is False:
            return Verdict(False, "the server restarted by itself during verification")
    if not covered(after):
        return Verdict(False, "no fresh signals covered a window after the change: not verified")
    return judge(baseline, after, instance)


async def baseline_window(
    instance: VllmInstance, windows: SignalWindows, clock: Clock
) -> Mapping[str, float | None] | None:
    """The signals over the window before a change; None when no fresh data covers it in time.

    A governor that just started has not watched the server for a window yet: it waits (at
    most a window and :data:`SOURCE_CATCH_UP_S`), since a change it could not compare with
    anything could not be verified either.
    """
    window = instance.verify_window_s
    give_up = clock.monotonic() + window + SOURCE_CATCH_UP_S
    while not covered(measured := windows.measure(instance.name, window)):
        if clock.monotonic() >= give_up:
            return None
        await asyncio.sleep(max(0.25, min(instance.scrape_interval_s, window / 4)))
    return measured


def covered(measured: Mapping[str, float | None]) -> bool:
    """Whether the counters' rates are known: the store covers the window with fresh data.

    Latency needs traffic, counters do not: a rate of 0 preemptions is data, None is not.
    """
    return any(measured.get(name) is not None for name in COUNTERS)
