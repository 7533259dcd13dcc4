"""``vllm-governor schema``: the JSON Schema of policy files (or test files), for editors.

With ``--signals``, the signals policies may read instead: every declared signal with the
source that produces it, its shape (scalar, or map and the label that keys it) and its unit,
for the built-in sources or, with ``--config``, for that configuration's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon.app.config_broken import config_broken
from daemon.app.defaults import EXIT_OK
from daemon.core.errors import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``schema`` subcommand."""
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of policy files, or the signals policies may read",
        description="Print the JSON Schema of a policy file (or, with --tests, of a policy test "
        "file), generated from the models the governor validates with. Point "
        "yaml-language-server at it: '# yaml-language-server: $schema=PATH' on a file's first "
        "line. With --signals, list the signals policies may read instead, with their source.",
    )
    parser.add_argument(
        "--tests", action="store_true", help="the schema of policy test files instead"
    )
    parser.add_argument(
        "--signals",
        action="store_true",
        help="the signals policies may read (with --config: that configuration's)",
    )
    parser.add_argument(
        "--config", type=Path, help="config.toml whose Prometheus and MQTT signals to include"
    )
    parser.add_argument("--json", action="store_true", help="with --signals: print JSON")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the schema, or the signals."""
    if args.signals:
        return _signals(args.config, as_json=args.json)
    from daemon.policy.schemas import policy_schema, policy_test_schema, render

    sys.stdout.write(render(policy_test_schema() if args.tests else policy_schema()))
    return EXIT_OK


def _signals(config_path: Path | None, *, as_json: bool) -> int:
    from daemon.core.config_files import load_config
    from daemon.sources.registry import BUILTIN, signal_registry

    signals = BUILTIN
    if config_path is not None:
        try:
            signals = signal_registry(load_config(config_path), config_path)
        except ConfigError as exc:
            return config_broken(exc)
    if as_json:
        print(json.dumps({"signals": [d.as_json() for d in signals]}, indent=2))
        return EXIT_OK
    for declaration in signals:
        shape = f"map[{declaration.key}]" if declaration.key else "scalar"
        scope = "per target" if declaration.per_target else "shared"
        unit = f" ({declaration.unit})" if declaration.unit else ""
        print(
            f"{declaration.name:<36} {declaration.source:<10} {shape:<12} {scope:<10} "
            f"{declaration.help}{unit}"
        )
    return EXIT_OK
