"""The demo's terminal view: a live panel on a terminal, a line every few seconds elsewhere.

On a TTY, :class:`LiveView` redraws one panel (rich's ``Live``, twice a second, on the
alternate lines it owns, so it does not flicker or scroll): the offered load, the queue, KV
use, TTFT and TPOT P95 against the SLO, the ``max-num-batched-tokens`` being served, the daemon's
state, pending proposals, the latest changes and what happened. Without a TTY (CI, a pipe),
:class:`PlainView` prints one status line every five seconds and each event as it happens.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from daemon.app.demo.approver import describe
from daemon.app.demo.sampler import Sample
from daemon.app.demo.scenario import TPOT_SLO_S, TTFT_SLO_S, TUNED_OPTION

LOAD_WINDOW_S = 10.0
PLAIN_EVERY_S = 5.0


class View(Protocol):
    """What the runner draws on."""

    def show(self, frame: Frame) -> None:
        """Draw the state now."""

    def event(self, t: float, text: str) -> None:
        """Tell of something that happened at ``t``."""

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hand the terminal to a prompt for a while."""
        yield


class Frame:
    """One moment of the run, as the views draw it.

    Args:
        t: Seconds since the workload's time 0.
        total_s: The run's duration.
        sample: The latest sample, or None before the first.
        arrivals_per_s: The offered load over the last ten seconds.
        proposals: Pending proposals.
        actuations: The latest changes, newest first.
        approve: The approval mode.
    """

    def __init__(
        self,
        *,
        t: float,
        total_s: float,
        sample: Sample | None,
        arrivals_per_s: float,
        proposals: Sequence[dict[str, Any]],
        actuations: Sequence[dict[str, Any]],
        approve: str,
    ) -> None:
        self.t = t
        self.total_s = total_s
        self.sample = sample
        self.arrivals_per_s = arrivals_per_s
        self.proposals = [p for p in proposals if p.get("state") == "pending"]
        self.actuations = list(actuations)
        self.approve = approve

    def value(self, name: str) -> float | None:
        """A signal of the latest sample (None: not known now)."""
        return None if self.sample is None else self.sample.values.get(name)

    def status_line(self) -> str:
        """The state in one line."""
        knob = self.sample.knob if self.sample else None
        state = self.sample.state if self.sample else None
        return (
            f"[{clock(self.t)}/{clock(self.total_s)}] load {self.arrivals_per_s:.1f} req/s, "
            f"running {number(self.value('running'), '.0f')}, "
            f"waiting {number(self.value('waiting'), '.0f')}, "
            f"KV {percent(self.value('kv_usage'))}, "
            f"TTFT p95 {seconds(self.value('ttft_p95_s'))} (SLO {TTFT_SLO_S:g} s), "
            f"TPOT p95 {millis(self.value('tpot_p95_s'))} (SLO {TPOT_SLO_S * 1000:g} ms), "
            f"preemptions {number(self.value('preemptions_per_s'), '.2f')}/s, "
            f"{TUNED_OPTION} {knob if knob is not None else 'down'}, governor {state or '?'}"
        )


def offered_load(arrival_times: Sequence[float], t: float) -> float:
    """Arrivals per second of the workload over the ``LOAD_WINDOW_S`` before ``t``."""
    start = max(0.0, t - LOAD_WINDOW_S)
    if t <= start:
        return 0.0
    count = bisect.bisect_right(arrival_times, t) - bisect.bisect_right(arrival_times, start)
    return count / (t - start)


def clock(seconds_: float) -> str:
    """``m:ss``."""
    whole = max(0, int(seconds_))
    return f"{whole // 60}:{whole % 60:02d}"


def number(value: float | None, spec: str) -> str:
    """A value, or ``-`` when not known."""
    return "-" if value is None else format(value, spec)


def percent(value: float | None) -> str:
    """A 0-1 share as a percentage."""
    return "-" if value is None else f"{value:.0%}"


def seconds(value: float | None) -> str:
    """Seconds with one decimal."""
    return "-" if value is None else f"{value:.1f} s"


def millis(value: float | None) -> str:
    """Seconds as milliseconds."""
    return "-" if value is None else f"{value * 1000:.0f} ms"


def action_line(action: dict[str, Any]) -> str:
    """One change of the journal."""
    where = f"at {action.get('step')}" if action.get("state") == "open" else action.get("outcome")
    return f"#{action.get('id')} {action.get('policy')}: {action.get('state')}: {where}"


class PlainView:
    """A status line every ``PLAIN_EVERY_S`` seconds, and events as they happen."""

    def __init__(self) -> None:
        self._last = -float("inf")

    def show(self, frame: Frame) -> None:
        """Print the status line when it is due."""
        if frame.t - self._last >= PLAIN_EVERY_S:
            self._last = frame.t
            print(frame.status_line(), flush=True)

    def event(self, t: float, text: str) -> None:
        """Print the event."""
        print(f"[{clock(t)}] {text}", flush=True)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing to pause."""
        yield


class LiveView:
    """A rich ``Live`` panel."""

    def __init__(self) -> None:
        self.console = Console()
        self._events: list[str] = []
        self._live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._frame: Frame | None = None

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._live.stop()

    def show(self, frame: Frame) -> None:
        """Redraw with ``frame``."""
        self._frame = frame
        self._live.update(self._render(frame))

    def event(self, t: float, text: str) -> None:
        """Keep the event for the panel's last lines."""
        self._events.append(f"[{clock(t)}] {text}")
        if self._frame is not None:
            self._live.update(self._render(self._frame))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop redrawing while a prompt owns the terminal."""
        self._live.stop()
        try:
            yield
        finally:
            self._live.start()

    def _render(self, frame: Frame) -> Any:
        # One space between columns: the tuned option's full name (22 characters) then fits
        # in an 80-column terminal without being cut.
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        ttft, tpot = frame.value("ttft_p95_s"), frame.value("tpot_p95_s")
        knob = frame.sample.knob if frame.sample else None
        table.add_row(
            "offered load", f"{frame.arrivals_per_s:.1f} req/s",
            TUNED_OPTION, str(knob) if knob is not None else "[yellow]down[/]",
        )  # fmt: skip
        table.add_row(
            "running / waiting",
            f"{number(frame.value('running'), '.0f')} / {number(frame.value('waiting'), '.0f')}",
            "KV cache use", percent(frame.value("kv_usage")),
        )  # fmt: skip
        table.add_row(
            "TTFT p95", _against(ttft, TTFT_SLO_S, seconds(ttft), f"{TTFT_SLO_S:g} s"),
            "TPOT p95", _against(tpot, TPOT_SLO_S, millis(tpot), f"{TPOT_SLO_S * 1000:g} ms"),
        )  # fmt: skip
        state = frame.sample.state if frame.sample else None
        table.add_row(
            "preemptions", f"{number(frame.value('preemptions_per_s'), '.2f')}/s",
            "governor", state or "[yellow]not answering[/]",
        )  # fmt: skip
        parts: list[Any] = [table, Text("")]
        parts.append(Text("pending proposals:", style="bold"))
        pending = [describe(proposal) for proposal in frame.proposals] or ["none"]
        parts.extend(Text("  " + line) for line in pending)
        parts.append(Text("changes:", style="bold"))
        changes = [action_line(action) for action in frame.actuations[:3]] or ["none yet"]
        parts.extend(Text("  " + line) for line in changes)
        parts.append(Text("events:", style="bold"))
        for line in self._events[-6:] or ["  none yet"]:
            parts.append(Text("  " + line.strip()))
        title = (
            f"vllm-governor demo  {clock(frame.t)} / {clock(frame.total_s)}  "
            f"(approvals: {frame.approve}; Ctrl-C stops)"
        )
        return Panel(Group(*parts), title=title, title_align="left")


def _against(value: float | None, slo: float, text: str, slo_text: str) -> str:
    if value is None:
        return f"- (SLO {slo_text})"
    colour = "red" if value > slo else "green"
    return f"[{colour}]{text}[/] (SLO {slo_text})"


def terminal_is_interactive() -> bool:
    """Whether stdout is a terminal a live panel can own."""
    return sys.stdout.isatty()
