"""``vllm-governor backtest``: recorded signals replayed through policies, before deploying them.

The series come from a recording the daemon wrote (``[recording]`` in config.toml) or from a
Prometheus range; the policies see them tick by tick, as the daemon would have, and the
would-have timeline is printed: fires and resolves, intents (automatic or for approval),
blocked actions with their guard, and flaps. ``--against`` replays a second policy directory
over the same ticks and prints where the two disagree. See docs/backtest.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.app.config_broken import config_broken
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from daemon.app.backtest.runner import Options, Outcome, PrometheusRange
    from daemon.core.settings import GovernorConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``backtest`` subcommand."""
    parser = subparsers.add_parser(
        "backtest",
        help="replay recorded signals through policies: what would they have done?",
        description="Replay a recording (--recording) or a Prometheus range (--prometheus) "
        "through the policies in --policies, tick by tick as the daemon would, and print the "
        "would-have timeline: fired/resolved, intents (auto or approval), blocked actions with "
        "their guard, and flaps. With --against, also the difference between the two policy "
        "directories. Exits 0 when it ran, 1 when an input is unusable, 2 on bad options.",
    )
    series = parser.add_argument_group("series (one of)")
    series.add_argument(
        "--recording",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a recording the daemon wrote; repeat for rotated files, oldest first",
    )
    series.add_argument("--prometheus", metavar="URL", help="import a range from Prometheus")
    series.add_argument("--start", metavar="TIME", help="ISO 8601, epoch seconds, or now-1h")
    series.add_argument("--end", metavar="TIME", default="now", help="as --start (default: now)")
    series.add_argument("--step", default="15s", help="seconds between ticks (default: 15s)")
    series.add_argument(
        "--selector",
        action="append",
        default=[],
        metavar="TARGET=MATCHERS",
        help='the label matchers of a server\'s series (default: instance="HOST:PORT" of its '
        "url in config.toml)",
    )
    series.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="TARGET.KNOB=VALUE",
        help="a knob's value over the whole range (Prometheus does not know them)",
    )
    series.add_argument("--save", type=Path, metavar="FILE", help="write the import as a recording")
    parser.add_argument("--policies", type=Path, metavar="DIR", help="the policies to replay")
    parser.add_argument("--against", type=Path, metavar="DIR", help="other policies to compare")
    parser.add_argument(
        "--config",
        type=Path,
        help=f"config.toml for servers, envelopes and signal window (default: {DEFAULT_CONFIG} "
        "when it exists; without one, no intent passes: no server has an envelope)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the result as JSON")
    parser.add_argument(
        "--flap-fires",
        type=int,
        default=3,
        metavar="N",
        help="a policy firing more than N times within an hour flaps (default: 3)",
    )
    parser.add_argument(
        "--flap-reversal",
        default="5m",
        metavar="DURATION",
        help="a knob moved one way then back within this flaps (default: 5m)",
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Run the backtest and print its timeline(s) and diff."""
    from daemon.app.backtest.errors import BacktestError
    from daemon.app.backtest.runner import run_backtest
    from daemon.core.errors import ConfigError

    try:
        options = _options(args)
    except _UsageError as exc:
        print(f"vllm-governor backtest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        return config_broken(exc)
    try:
        outcome = run_backtest(options)
        _save(args.save, outcome)
        _print(outcome)
        if args.json is not None:
            _write_json(args.json, outcome)
    except BacktestError as exc:
        print(f"vllm-governor backtest: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


class _UsageError(ValueError):
    """Options that do not make a backtest."""


def _options(args: argparse.Namespace) -> Options:
    from daemon.app.backtest.runner import Options
    from daemon.policy.durations import parse_duration

    if bool(args.recording) == bool(args.prometheus):
        message = "give either --recording FILE or --prometheus URL (with --start)"
        raise _UsageError(message)
    if args.policies is None and args.save is None:
        message = "give --policies DIR (or, to only import, --save FILE)"
        raise _UsageError(message)
    if args.against is not None and args.policies is None:
        message = "--against needs --policies to compare with"
        raise _UsageError(message)
    if args.flap_fires < 1:
        message = f"--flap-fires must be at least 1, not {args.flap_fires}"
        raise _UsageError(message)
    try:
        reversal_s = parse_duration(args.flap_reversal)
    except ValueError as exc:
        message = f"--flap-reversal: {exc}"
        raise _UsageError(message) from exc
    return Options(
        config=_config(args.config),
        recordings=tuple(args.recording),
        prometheus=_prometheus(args) if args.prometheus else None,
        policies=args.policies,
        against=args.against,
        max_fires_per_hour=args.flap_fires,
        reversal_s=reversal_s,
    )


def _config(path: Path | None) -> GovernorConfig:
    from daemon.core.config_files import load_config
    from daemon.core.settings import GovernorConfig

    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    if path is None:
        return GovernorConfig()
    return load_config(path)


def _prometheus(args: argparse.Namespace) -> PrometheusRange:
    from daemon.app.backtest.runner import PrometheusRange
    from daemon.policy.durations import parse_duration

    if args.start is None:
        message = "--prometheus needs --start (and optionally --end, --step)"
        raise _UsageError(message)
    now = datetime.now(UTC)
    try:
        step_s = parse_duration(args.step)
    except ValueError as exc:
        message = f"--step: {exc}"
        raise _UsageError(message) from exc
    return PrometheusRange(
        url=args.prometheus,
        start=_time("--start", args.start, now),
        end=_time("--end", args.end, now),
        step_s=step_s,
        selectors=dict(_pair("--selector", text) for text in args.selector),
        knobs=_knobs(args.knob),
    )


def _time(option: str, text: str, now: datetime) -> datetime:
    """``2026-11-29T10:00:00Z``, ``1790000000`` (epoch seconds), ``now`` or ``now-90m``."""
    from daemon.policy.durations import parse_duration

    try:
        if text == "now":
            return now
        if text.startswith("now-"):
            return now - timedelta(seconds=parse_duration(text[4:]))
        try:
            return datetime.fromtimestamp(float(text), UTC)
        except ValueError:
            moment = datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError) as exc:
        message = f"{option} {text!r}: write ISO 8601 (2026-11-29T10:00:00Z), epoch seconds, "
        message += f"now, or now-1h ({exc})"
        raise _UsageError(message) from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _pair(option: str, text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name or not value:
        message = f"{option} {text!r}: write NAME=VALUE"
        raise _UsageError(message)
    return name, value


def _knobs(texts: list[str]) -> dict[str, dict[str, float]]:
    knobs: dict[str, dict[str, float]] = {}
    for text in texts:
        where, value = _pair("--knob", text)
        target, dot, knob = where.partition(".")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not dot or not target or not knob or not math.isfinite(number):
            message = f"--knob {text!r}: write TARGET.KNOB=NUMBER (main.max_num_seqs=256)"
            raise _UsageError(message)
        knobs.setdefault(target, {})[knob] = number
    return knobs


def _save(path: Path | None, outcome: Outcome) -> None:
    from daemon.app.backtest.errors import BacktestError
    from daemon.engine.evaluation.recorder import encode_tick

    if path is None:
        return
    lines = (encode_tick(t.wall, t.monotonic, t.views) for t in outcome.recording.ticks)
    try:
        path.write_text("".join(lines), encoding="utf-8")
    except OSError as exc:
        message = f"{path}: cannot write the recording: {exc.strerror or exc}"
        raise BacktestError(message) from exc
    print(f"saved {len(outcome.recording.ticks)} tick(s) to {path}")


def _print(outcome: Outcome) -> None:
    from daemon.app.backtest.report import diff_lines, timeline_lines

    recording = outcome.recording
    for warning in recording.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    ticks = recording.ticks
    first, last = ticks[0].wall.astimezone(UTC), ticks[-1].wall.astimezone(UTC)
    print(
        f"{len(ticks)} tick(s) from {first:%Y-%m-%d %H:%M:%S} to {last:%Y-%m-%d %H:%M:%S} UTC; "
        f"targets: {', '.join(recording.targets()) or 'none'}"
    )
    for label, timeline in (("A", outcome.a), ("B", outcome.b)):
        if timeline is not None:
            print(f"\n[{label}] " + "\n".join(timeline_lines(timeline)))
    if outcome.b is not None:
        print("\n" + "\n".join(diff_lines(outcome.differences)))


def _write_json(path: Path, outcome: Outcome) -> None:
    from daemon.app.backtest.errors import BacktestError
    from daemon.app.backtest.report import document

    if outcome.a is None:
        return
    body = document(outcome.recording, outcome.a, outcome.b, outcome.differences)
    try:
        path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        message = f"{path}: cannot write the JSON result: {exc.strerror or exc}"
        raise BacktestError(message) from exc
