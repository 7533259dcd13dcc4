"""Recordings, policies and configurations for backtest tests, written as the daemon would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from daemon.core.config_files import parse_config
from daemon.core.recording_settings import RecordingSection
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.recorder import Recorder
from daemon.policy.evaluate import TargetView

START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
INTERVAL_S = 5.0

Signals = Mapping[str, Any]


def write_recording(
    path: Path,
    signals: Sequence[Signals],
    knobs: Mapping[str, float] | None = None,
    *,
    target: str = "main",
    monotonic_start: float = 1000.0,
) -> Path:
    """One tick per entry of ``signals``, every INTERVAL_S, through the daemon's recorder."""
    settings = RecordingSection(enabled=True, path=path)
    recorder = Recorder(lambda: settings)
    for index, values in enumerate(signals):
        offset = index * INTERVAL_S
        view = TargetView(target, dict(values), dict(knobs or {}))
        recorder.record(START + timedelta(seconds=offset), monotonic_start + offset, {target: view})
    recorder.close()
    return path


def series(*runs: tuple[int, Signals]) -> list[Signals]:
    """``(ticks, values)`` runs, concatenated: ``series((12, {"running": 12.0}), ...)``."""
    return [values for count, values in runs for _ in range(count)]


def write_policy(directory: Path, name: str, text: str) -> Path:
    """A policy file ``name``.yaml in ``directory`` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(text, encoding="utf-8")
    return directory


def config(
    *,
    actuated: bool = True,
    dwell_s: float = 120.0,
    budget: int = 10,
    state_dir: Path | None = None,
) -> GovernorConfig:
    """One server ``main`` with an envelope for max_num_seqs; actuated unless told not to.

    ``state_dir`` is where the daemon's state (and freeze files) would be.
    """
    files = 'config_path = "/etc/vllm/main.yaml"\nunit = "vllm@main.service"\n' if actuated else ""
    governor = f'[governor]\nstate_dir = "{state_dir}"\n' if state_dir is not None else ""
    text = (
        f'{governor}[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:8000"\n{files}'
        "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 64\n"
        f"min_dwell_s = {dwell_s}\nhourly_budget = {budget}\n"
    )
    return parse_config(text, Path("config.toml"))


BUSY = """\
name: busy
description: Halve the sequences while more than {threshold} requests run.
targets: ["*"]
when: running > {threshold}.0
for: 10s
action:
  set: {{max_num_seqs: "current * 0.5"}}
  risk: {risk}
cooldown: 60s
budget_per_hour: 10
"""


def busy(threshold: int = 10, risk: str = "auto") -> str:
    """The ``busy`` policy with its threshold and risk."""
    return BUSY.format(threshold=threshold, risk=risk)
