"""``vllm-governor policies copy DIR``: the default policy pack, copied out for editing.

The pack ships inside the installed package (:mod:`daemon.shipped`), where it is read-only in
practice and replaced by the next upgrade; an operator who wants to change a threshold copies
it to a directory of their own (``/etc/vllm-governor/policies``) and points
``governor.policy_dirs`` at it. The copy keeps the pack's layout, policy tests included
(``policies/tests/*.test.yaml`` name their policies as ``../NAME.yaml``), so ``vllm-governor test
DIR/tests`` runs against the edited files.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from daemon.app.defaults import EXIT_FAILURE, EXIT_OK, EXIT_USAGE

# How many conflicting files a refusal names before it says "and N more".
_NAMED = 5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``policies`` subcommand."""
    parser = subparsers.add_parser(
        "policies",
        help="copy the default policy pack to a directory for editing",
        description="Work with the default policy pack that ships with the governor.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION")
    copy = actions.add_parser(
        "copy",
        help="copy the default pack (and its policy tests) into DIR",
        description="Copy the default policy pack, with its policy tests, into DIR (created if "
        "missing), then point governor.policy_dirs at DIR. Refuses, writing nothing, when a "
        "file it would write is already there, unless --force.",
    )
    copy.add_argument("directory", type=Path, metavar="DIR", help="where to copy the pack")
    copy.add_argument(
        "--force", action="store_true", help="overwrite files of the same name already in DIR"
    )
    copy.set_defaults(main=copy_main)
    parser.set_defaults(main=lambda _args: _usage(parser))


def copy_main(args: argparse.Namespace) -> int:
    """Copy the pack; 0 when copied, 1 when refused or failed."""
    from daemon.shipped import default_pack

    pack = default_pack()
    if not pack.is_dir():
        _error(f"the default pack is not at {pack}: this installation is incomplete")
        return EXIT_FAILURE
    destination: Path = args.directory
    if destination.exists() and not destination.is_dir():
        _error(f"{destination} exists and is not a directory")
        return EXIT_FAILURE
    # The policies first, then their tests: the order an operator reads them in.
    names = sorted(
        (path.relative_to(pack) for path in pack.rglob("*") if path.is_file()),
        key=lambda name: (len(name.parts), str(name)),
    )
    present = [name for name in names if (destination / name).exists()]
    if present and not args.force:
        _error(
            f"{destination} already has {len(present)} of the pack's files ({_listed(present)}); "
            "nothing was written. Copy to an empty directory, or add --force to overwrite them."
        )
        return EXIT_FAILURE
    try:
        for name in names:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            # copyfile, not copy2: the copy is the operator's to edit, so it gets their umask's
            # mode and a fresh time, not the installed file's.
            shutil.copyfile(pack / name, destination / name)
    except OSError as exc:
        _error(f"cannot copy the pack to {destination}: {exc}")
        return EXIT_FAILURE
    _report(destination, names, replaced=len(present))
    return EXIT_OK


def _report(destination: Path, names: list[Path], *, replaced: int) -> None:
    overwritten = f", {replaced} of them overwritten" if replaced else ""
    print(f"copied the default pack into {destination}: {len(names)} files{overwritten}")
    for name in names:
        print(f"  {destination / name}")
    print("next: edit the policies, then")
    print(f"  vllm-governor test {destination / 'tests'}")
    print(f"  vllm-governor check --config CONFIG {destination}")
    print(f'  and set policy_dirs = ["{destination.resolve()}"] in config.toml\'s [governor]')


def _listed(names: list[Path]) -> str:
    shown = ", ".join(str(name) for name in names[:_NAMED])
    more = len(names) - _NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _error(message: str) -> None:
    print(f"vllm-governor policies copy: {message}", file=sys.stderr)
