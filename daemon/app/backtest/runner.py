"""A whole backtest: inputs read and checked, one or two replays, flaps and the diff.

Pure but for reading files and querying Prometheus; the command line prints what
:func:`run_backtest` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.app.backtest.diff import Difference, diff
from daemon.app.backtest.errors import BacktestError
from daemon.app.backtest.flaps import DEFAULT_MAX_FIRES_PER_HOUR, DEFAULT_REVERSAL_S, find_flaps
from daemon.app.backtest.governed import replay
from daemon.app.backtest.promql import default_selector
from daemon.app.backtest.recording import Recording, read_recording
from daemon.app.backtest.report import Timeline
from daemon.core.settings import GovernorConfig
from daemon.policy.loading import load_policies
from daemon.sources.registry import signal_registry

if TYPE_CHECKING:
    from daemon.app.backtest.prometheus_import import RangeRequest


@dataclass(frozen=True, slots=True)
class PrometheusRange:
    """A Prometheus range to import instead of a recording (``--prometheus``)."""

    url: str
    start: datetime
    end: datetime
    step_s: float
    selectors: Mapping[str, str]  # per target; the config's url gives the default
    knobs: Mapping[str, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class Options:
    """What to backtest, and against what."""

    config: GovernorConfig
    recordings: Sequence[Path] = ()
    prometheus: PrometheusRange | None = None
    policies: Path | None = None
    against: Path | None = None
    max_fires_per_hour: int = DEFAULT_MAX_FIRES_PER_HOUR
    reversal_s: float = DEFAULT_REVERSAL_S


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a backtest found."""

    recording: Recording
    a: Timeline | None
    b: Timeline | None
    differences: tuple[Difference, ...]


def run_backtest(options: Options) -> Outcome:
    """Read the series, replay them through the policies (and ``against``), compare.

    Raises:
        BacktestError: an input is unusable; the message says which and why.
    """
    recording = load_series(options)
    if options.policies is None:
        return Outcome(recording, None, None, ())
    a = _timeline(options, options.policies, recording)
    if options.against is None:
        return Outcome(recording, a, None, ())
    b = _timeline(options, options.against, recording)
    return Outcome(recording, a, b, tuple(diff(a.events, b.events)))


def load_series(options: Options) -> Recording:
    """The recording's ticks, or the Prometheus range's, checked for being usable."""
    if options.prometheus is not None:
        # Imported only here: prometheus-api-client brings requests and pandas' kin with it.
        from daemon.app.backtest.prometheus_import import import_range  # noqa: PLC0415

        recording = Recording(tuple(import_range(_range_request(options))), ())
    else:
        recording = read_recording(options.recordings)
    if not recording.ticks:
        where = "the Prometheus range" if options.prometheus else "the recording"
        message = f"{where} holds no usable tick: nothing to replay"
        raise BacktestError(message)
    return recording


def _range_request(options: Options) -> RangeRequest:
    from daemon.app.backtest.prometheus_import import RangeRequest  # noqa: PLC0415

    prometheus = options.prometheus
    assert prometheus is not None
    config = options.config
    selectors = {
        instance.name: prometheus.selectors.get(instance.name, default_selector(instance.url))
        for instance in config.vllm
    }
    selectors |= prometheus.selectors
    if not selectors:
        message = (
            "no target to import: give --config with [[vllm]] servers, or --selector "
            'NAME=MATCHERS (e.g. main=instance="10.0.0.5:8000")'
        )
        raise BacktestError(message)
    source = config.sources.prometheus
    return RangeRequest(
        url=prometheus.url,
        start=prometheus.start,
        end=prometheus.end,
        step_s=prometheus.step_s,
        selectors=selectors,
        window_s=config.signals.window_s,
        queries={name: spec.query for name, spec in source.query_specs().items()},
        keep_labels=(
            *source.keep_labels,
            *(spec.key for spec in source.query_specs().values() if spec.key),
        ),
        knobs=prometheus.knobs,
        signals=signal_registry(config),
    )


def _timeline(options: Options, directory: Path, recording: Recording) -> Timeline:
    config = options.config
    if not directory.is_dir():
        message = f"{directory}: not a directory of policy files"
        raise BacktestError(message)
    targets = list(dict.fromkeys([*config.target_names(), *recording.targets()]))
    signals = signal_registry(config)
    loaded = load_policies([directory], targets, config.envelopes(), signals=signals)
    if loaded.issues:
        problems = "\n".join(issue.render() for issue in loaded.issues)
        message = f"{directory}: fix these policy files first:\n{problems}"
        raise BacktestError(message)
    if not loaded.specs:
        message = f"{directory}: no policy files (*.yaml, *.yml) in it"
        raise BacktestError(message)
    events = tuple(replay(config, directory, recording.ticks))
    flaps = find_flaps(
        events, max_fires_per_hour=options.max_fires_per_hour, reversal_s=options.reversal_s
    )
    return Timeline(str(directory), events, tuple(flaps))
