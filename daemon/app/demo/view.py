"""The demo's terminal view: a live panel on a terminal, a line every few seconds elsewhere.

On a TTY, :class:`LiveView` redraws one panel (rich's ``Live``, twice a second, on the
alternate lines it owns, so it does not flicker or scroll): the offered load, the queue, KV
use, TTFT and TPOT P95 against the SLO, SLO attainment so far (before and after a change),
the ``max-num-batched-tokens`` being served, the daemon's state, what the governor waits for
and when it will act, the proposal it asks you about (the panel goes on updating while it
asks: the answer is one key), the latest changes with what a restart cost, and what
happened. Without a TTY (CI, a pipe), :class:`PlainView` prints one status line every five
seconds and each event as it happens.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from daemon.app.demo.approver import describe
from daemon.app.demo.narration import basis_line, change_line, clock
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


@dataclass(frozen=True, slots=True)
class Frame:
    """One moment of the run, as the views draw it.

    Attributes:
        t: Seconds since the workload's time 0.
        total_s: The run's duration.
        sample: The latest sample, or None before the first.
        arrivals_per_s: The offered load over the last ten seconds.
        actuations: The latest changes, newest first.
        approve: The approval mode.
        waiting: What the governor waits for (:func:`~daemon.app.demo.narration.waiting_lines`).
        asking: The proposal the demo asks you about now, or None.
        proposals: Other proposals waiting for an answer, one line each.
        slo: SLO attainment as measured so far, one line each.
        costs: The measured cost of each restart, one line each.
        slo_now: The share of first tokens within the TTFT SLO lately (None: none came).
    """

    t: float
    total_s: float
    sample: Sample | None
    arrivals_per_s: float
    actuations: Sequence[dict[str, Any]] = ()
    approve: str = "auto"
    waiting: Sequence[str] = ()
    asking: dict[str, Any] | None = None
    proposals: Sequence[str] = ()
    slo: Sequence[str] = ()
    costs: Sequence[str] = ()
    slo_now: float | None = None

    def value(self, name: str) -> float | None:
        """A signal of the latest sample (None: not known now)."""
        return None if self.sample is None else self.sample.values.get(name)

    def status_line(self) -> str:
        """The state in one line."""
        if self.sample is None:
            return f"[{clock(self.t)}/{clock(self.total_s)}] no reading yet"
        knob, state = self.sample.knob, self.sample.state
        return (
            f"[{clock(self.t)}/{clock(self.total_s)}] load {self.arrivals_per_s:.1f} req/s, "
            f"running {number(self.value('running'), '.0f')}, "
            f"waiting {number(self.value('waiting'), '.0f')}, "
            f"gate cap {number(self.value('gate_cap'), '.0f')} "
            f"({number(self.value('gate_queue'), '.0f')} queued there), "
            f"KV {percent(self.value('kv_usage'))}, "
            f"TTFT p95 {seconds(self.value('ttft_p95_s'))} (SLO {TTFT_SLO_S:g} s), "
            f"TPOT p95 {millis(self.value('tpot_p95_s'))} (SLO {TPOT_SLO_S * 1000:g} ms), "
            f"first tokens within {TTFT_SLO_S:g} s lately {percent(self.slo_now)}, "
            f"preemptions {number(self.value('preemptions_per_s'), '.1f')}/s, "
            f"{TUNED_OPTION} {knob if knob is not None else 'down'}, governor {state or '?'}"
        )


def offered_load(arrival_times: Sequence[float], t: float) -> float:
    """Arrivals per second of the workload over the ``LOAD_WINDOW_S`` before ``t``."""
    start = max(0.0, t - LOAD_WINDOW_S)
    if t <= start:
        return 0.0
    count = bisect.bisect_right(arrival_times, t) - bisect.bisect_right(arrival_times, start)
    return count / (t - start)


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

    def _render(self, frame: Frame) -> Any:
        return render_panel(frame, self._events)


def render_panel(frame: Frame, events: Sequence[str]) -> Panel:
    """The live panel of ``frame``, with the last of ``events``."""
    parts: list[Any] = [_readings(frame), Text("")]
    parts.extend(_section("SLO attainment:", frame.slo, "no request has finished yet"))
    if frame.asking is not None:
        parts.extend(_question(frame.asking))
    parts.extend(
        _section("the governor is waiting for:", frame.waiting, "no policy's condition holds")
    )
    if frame.proposals:
        parts.extend(_section("proposals waiting for an answer:", frame.proposals, ""))
    changes = [change_line(action) for action in frame.actuations[:3]]
    parts.extend(_section("changes:", [*changes, *frame.costs], "none yet"))
    parts.extend(_section("events:", [line.strip() for line in events[-6:]], "none yet"))
    title = (
        f"vllm-governor demo  {clock(frame.t)} / {clock(frame.total_s)}  "
        f"(approvals: {frame.approve}; Ctrl-C stops)"
    )
    return Panel(Group(*parts), title=title, title_align="left")


def _readings(frame: Frame) -> Table:
    # One space between columns: the tuned option's full name (22 characters) then fits
    # in an 80-column terminal without being cut.
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    ttft, tpot = frame.value("ttft_p95_s"), frame.value("tpot_p95_s")
    knob = frame.sample.knob if frame.sample else None
    if frame.sample is None:
        served = "-"  # no reading yet: not known to be down
    else:
        served = str(knob) if knob is not None else "[yellow]down (restarting)[/]"
    table.add_row("offered load", f"{frame.arrivals_per_s:.1f} req/s", TUNED_OPTION, served)
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
        "preemptions", f"{number(frame.value('preemptions_per_s'), '.1f')}/s",
        "governor", state or "[yellow]not answering[/]",
    )  # fmt: skip
    # The admission gate in front of the server: what it lets in, and who waits there.
    gate = f"{number(frame.value('gate_cap'), '.0f')} / {number(frame.value('gate_queue'), '.0f')}"
    table.add_row("gate cap / queued", gate, "", "")
    return table


def _section(head: str, lines: Sequence[str], empty: str) -> list[Text]:
    texts = [Text(head, style="bold")]
    texts.extend(Text("  " + line) for line in (lines or [empty]))
    return texts


def _question(proposal: dict[str, Any]) -> list[Text]:
    texts = [Text(f"the governor proposes: {describe(proposal)}", style="bold yellow")]
    for key in ("why", "effect", "cost"):
        if proposal.get(key):
            texts.append(Text(f"  {key}: {proposal[key]}"))
    if basis := basis_line(proposal):
        texts.append(Text(f"  predicted from: {basis}"))
    texts.append(Text("  approve this change? press y (yes) or n (no)", style="bold yellow"))
    return texts


def _against(value: float | None, slo: float, text: str, slo_text: str) -> str:
    if value is None:
        return f"- (SLO {slo_text})"
    colour = "red" if value > slo else "green"
    return f"[{colour}]{text}[/] (SLO {slo_text})"


def terminal_is_interactive() -> bool:
    """Whether stdout is a terminal a live panel can own."""
    return sys.stdout.isatty()
