"""``vllm-governor shipped``: where the files that ship with the governor lie.

An installed governor carries its example configuration, systemd unit, polkit rule and default
policy pack inside the package (:mod:`daemon.shipped`), in a directory no one should have to
guess. Without an argument this lists them; with a name it prints that one path alone, for
scripts: ``install -m 0644 "$(vllm-governor shipped systemd/vllm-governor.service)"
/etc/systemd/system/``.
"""

from __future__ import annotations

import argparse
import sys

from daemon.app.defaults import EXIT_FAILURE, EXIT_OK
from daemon.shipped import DESCRIPTIONS, shipped_path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``shipped`` subcommand."""
    parser = subparsers.add_parser(
        "shipped",
        help="where the example config, systemd unit, polkit rule and default pack lie",
        description="List the files that ship with the governor and their paths, or print the "
        "path of one of them (for scripts).",
    )
    parser.add_argument(
        "name", nargs="?", choices=sorted(DESCRIPTIONS), help="print this one's path alone"
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """List the shipped files, or print one path; 1 when a file is missing."""
    names = [args.name] if args.name else list(DESCRIPTIONS)
    missing = [name for name in names if not shipped_path(name).exists()]
    for name in missing:
        print(
            f"vllm-governor shipped: {name} is not at {shipped_path(name)}: "
            "this installation is incomplete",
            file=sys.stderr,
        )
    if args.name:
        if not missing:
            print(shipped_path(args.name))
    else:
        for name in names:
            print(f"{name:<32} {shipped_path(name)}")
            print(f"{'':<32} {DESCRIPTIONS[name]}")
    return EXIT_FAILURE if missing else EXIT_OK
