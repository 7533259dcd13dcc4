"""The parser preflight's plumbing, with a stand-in vLLM package; the real parser is checked in
tests/real_vllm against vLLM 0.32's own."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from actuators.vllm.vllm_args import vllm_installed, vllm_objection
from daemon.api import SystemClock

# A stand-in for vLLM's parser at the module path of 0.32: it reads --config as vLLM does
# (one "key: value" per line becomes --key value) and knows two options.
FAKE_CLI_ARGS = """
def make_arg_parser(parser):
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--enable-log-requests", action="store_true")
    return parser
"""
FAKE_ARGPARSE_UTILS = """
import argparse

class FlexibleArgumentParser(argparse.ArgumentParser):
    def parse_args(self, args):
        if args[:1] == ["--config"]:
            expanded = []
            with open(args[1]) as config:
                for line in config:
                    key, _, value = line.partition(":")
                    expanded.append(f"--{key.strip()}")
                    if value.strip() != "true":
                        expanded.append(value.strip())
            args = expanded + args[2:]
        return super().parse_args(args)
"""


def fake_vllm(root: Path) -> None:
    package = root / "vllm"
    for module, text in {
        "entrypoints/launchers/cli_args.py": FAKE_CLI_ARGS,
        "utils/argparse_utils.py": FAKE_ARGPARSE_UTILS,
    }.items():
        path = package / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [package, package / "entrypoints", package / "entrypoints/launchers"]:
        (directory / "__init__.py").touch()
    (package / "utils/__init__.py").touch()


@pytest.mark.asyncio
async def test_without_vllm_or_its_interpreter_the_check_is_skipped() -> None:
    if vllm_installed():
        pytest.skip("vLLM is installed in the governor's environment here")
    assert await vllm_objection("max-num-partial-prefills: 2\n", SystemClock()) == ""


@pytest.mark.asyncio
async def test_a_configured_interpreter_that_is_missing_refuses(tmp_path: Path) -> None:
    said = await vllm_objection("max-num-seqs: 8\n", SystemClock(), tmp_path / "bin/python")
    assert "bin/python does not exist or is not executable" in said


@pytest.mark.asyncio
async def test_the_governors_interpreter_asks_an_importable_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_vllm(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert vllm_installed()
    clock = SystemClock()
    assert await vllm_objection("max-num-seqs: 8\nenable-log-requests: true\n", clock) == ""
    objection = await vllm_objection("max-num-partial-prefills: 2\n", clock)
    assert objection.startswith("vLLM's argument parser refuses the config: ")
    assert "unrecognized arguments: --max-num-partial-prefills 2" in objection


@pytest.mark.asyncio
async def test_a_configured_interpreter_is_asked_with_the_config_as_a_file(
    tmp_path: Path,
) -> None:
    fake_vllm(tmp_path / "site")
    # A "virtual environment" whose python finds the stand-in: a wrapper around this python.
    python = tmp_path / "bin/python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    clock = SystemClock()
    assert await vllm_objection("max-num-seqs: 8\n", clock, python) == ""
    objection = await vllm_objection("max-num-seqs: eight\n", clock, python)
    assert "argument --max-num-seqs: invalid int value: 'eight'" in objection
