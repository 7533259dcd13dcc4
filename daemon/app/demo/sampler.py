"""What the demo shows and plots: the daemon's own view, read twice a second.

Everything comes from where an operator would look: the governor's control socket
(``status``: its state, the journal of changes; ``signals``: what it sees of the server;
``proposals``), the server's log directory for its size (the disk act), and the server's
``/metrics`` for the serving process's start time, which
tells a restart (the value of the tuned option it serves with, ``max-num-batched-tokens``,
is then read from the YAML it started on), and its TTFT histogram (the first tokens within
the SLO, :mod:`~daemon.app.demo.first_tokens`). A value that is stale or not there is None, never
a zero. The sampler runs in a thread of its own so that a person answering a prompt does not
leave a hole in the plot.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from daemon.app.demo.first_tokens import FirstTokens, read_first_tokens
from daemon.app.demo.log_volume import directory_bytes
from daemon.app.demo.scenario import INSTANCE, TTFT_SLO_S, TUNED_OPTION
from daemon.core.errors import ControlError

INTERVAL_S = 0.5
SIGNALS = (
    "running",
    "waiting",
    "kv_usage",
    "ttft_p95_s",
    "tpot_p95_s",
    "preemptions_per_s",
    # The admission gate in front of the server: its cap and the requests waiting there.
    "gate_cap",
    "gate_queue",
)
_START = re.compile(r"^process_start_time_seconds\s+(\S+)\s*$", re.MULTILINE)
_TUNED = re.compile(r"^\s*" + TUNED_OPTION.replace("-", "[-_]") + r"\s*:\s*(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the run, ``t`` seconds after the workload's time 0.

    Attributes:
        t: Seconds since the workload's time 0.
        state: The daemon's state (``ready``, ...), or None when it did not answer.
        values: The server's signals as the daemon sees them (None: stale or no data).
        knob: The tuned option's value in the serving process, or None while none serves.
        first_tokens: The serving process's first tokens so far (None while none serves).
        log_bytes: The size of the server's log directory (None: not read).
    """

    t: float
    state: str | None
    values: dict[str, float | None]
    knob: int | None
    first_tokens: FirstTokens | None = None
    log_bytes: int | None = None


@dataclass
class Observed:
    """Everything sampled so far; read under ``lock``."""

    samples: list[Sample] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    actuations: list[dict[str, Any]] = field(default_factory=list)
    # Each policy's state per target (``status``): a pending one says when it will act.
    policies: list[dict[str, Any]] = field(default_factory=list)
    # The ``realised`` decisions seen (a tuned change's measured effect against its prediction),
    # oldest first: ``status`` lists only the newest decisions, so each is kept once seen.
    realised: list[dict[str, Any]] = field(default_factory=list)
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def serving_value(vllm_yaml: Path) -> int | None:
    """The tuned option (``TUNED_OPTION``) in the vLLM YAML, or None if it sets none."""
    match = _TUNED.search(vllm_yaml.read_text(encoding="utf-8"))
    return int(match.group(1)) if match else None


def signal_values(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The server's fresh signal values by short name; None where not ``ok``."""
    values: dict[str, float | None] = dict.fromkeys(SIGNALS)
    # The server's own row: the one without labels if there is one (a data-parallel server
    # also has one row per engine), else its only row (labelled with its one engine).
    chosen: dict[str, dict[str, Any]] = {}
    for row in rows:
        name = row.get("name")
        if row.get("target") != INSTANCE or name not in values:
            continue
        if name not in chosen or not row.get("labels"):
            chosen[name] = row
    for name, row in chosen.items():
        value = row.get("value")
        fresh = row.get("state") == "ok" and isinstance(value, int | float)
        values[name] = float(value) if fresh and value is not None else None
    return values


class Sampler(threading.Thread):
    """Samples until stopped.

    Args:
        control_socket: The daemon's control socket.
        sim_url: The server's base URL.
        vllm_yaml: The YAML the governor edits.
        origin: Unix time of the workload's time 0.
        log_dir: The server's log directory, whose size is sampled too (the disk act).
    """

    def __init__(
        self,
        control_socket: Path,
        sim_url: str,
        vllm_yaml: Path,
        origin: float,
        log_dir: Path | None = None,
    ):
        super().__init__(name="demo sampler", daemon=True)
        self._log_dir = log_dir
        self.observed = Observed()
        self._socket = control_socket
        self._metrics_url = sim_url + "/metrics"
        self._vllm_yaml = vllm_yaml
        self._origin = origin
        self._halt = threading.Event()
        self._process_start: str | None = None
        self._serving_seqs: int | None = None

    def stop(self) -> None:
        """Stop after the current look."""
        self._halt.set()
        self.join(timeout=5)

    def run(self) -> None:
        """Look every ``INTERVAL_S`` until stopped."""
        while not self._halt.is_set():
            started = time.monotonic()
            self.look()
            self._halt.wait(max(0.0, INTERVAL_S - (time.monotonic() - started)))

    def look(self) -> None:
        """Take one sample."""
        state = None
        values: dict[str, float | None] = dict.fromkeys(SIGNALS)
        proposals = actuations = policies = None
        decisions: list[dict[str, Any]] = []
        error = ""
        try:
            status = call_daemon(self._socket, "status", timeout_s=2.0)
            state = status.get("state")
            actuations = status.get("actuations", [])
            policies = status.get("policies", [])
            decisions = status.get("recent_decisions", [])
            values = signal_values(call_daemon(self._socket, "signals", timeout_s=2.0)["signals"])
            proposals = call_daemon(self._socket, "proposals", timeout_s=2.0)["proposals"]
        except ControlError as exc:
            error = str(exc)
        knob, first_tokens = self._serving()
        log_bytes = None if self._log_dir is None else directory_bytes(self._log_dir)
        t = time.time() - self._origin
        sample = Sample(t, state, values, knob, first_tokens, log_bytes)
        observed = self.observed
        with observed.lock:
            observed.samples.append(sample)
            observed.last_error = error
            if proposals is not None:
                observed.proposals = proposals
            if actuations is not None:
                observed.actuations = actuations
            if policies is not None:
                observed.policies = policies
            for decision in reversed(decisions):  # newest first in status
                if decision.get("kind") == "realised" and decision not in observed.realised:
                    observed.realised.append(decision)

    def _serving(self) -> tuple[int | None, FirstTokens | None]:
        """The serving process's tuned option (read again from the YAML on a restart), TTFTs."""
        try:
            with urllib.request.urlopen(self._metrics_url, timeout=2) as answer:  # noqa: S310
                page = answer.read().decode(errors="replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, None  # down: restarting, or loading
        match = _START.search(page)
        started = match.group(1) if match else None
        if started != self._process_start:
            self._process_start = started
            self._serving_seqs = serving_value(self._vllm_yaml)
        return self._serving_seqs, read_first_tokens(page, started or "", TTFT_SLO_S)
