from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from actuators.vllm.vllm_args import as_arguments, vllm_installed, vllm_objection
from daemon.api import SystemClock

# A stand-in for vLLM's argument parser, at the import paths vLLM 0.33 uses.
FAKE_CLI_ARGS = """
import argparse

def make_arg_parser(parser):
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--served-model-name")
    parser.add_argument("--enable-log-requests", action="store_true")
    return parser
"""
FAKE_ARGPARSE_UTILS = """
import argparse

class FlexibleArgumentParser(argparse.ArgumentParser):
    pass
"""


def test_options_become_the_command_line_vllm_builds_from_its_config() -> None:
    options = {"max-num-seqs": 8, "enable-log-requests": True, "trust-remote-code": False,
               "compilation-config": {"level": 3}, "allowed-origins": ["a", "b"]}  # fmt: skip
    assert as_arguments(options) == [
        "--max-num-seqs", "8", "--enable-log-requests", "--compilation-config", '{"level": 3}',
        "--allowed-origins", "a", "b",
    ]  # fmt: skip


@pytest.mark.asyncio
async def test_without_vllm_the_check_is_skipped() -> None:
    if vllm_installed():
        pytest.skip("vLLM is installed here")
    assert await vllm_objection({"max-num-partial-prefills": 2}, SystemClock()) == ""


@pytest.mark.asyncio
async def test_with_vllm_its_own_parser_refuses_unknown_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "vllm"
    for module, text in {
        "entrypoints/openai/cli_args.py": FAKE_CLI_ARGS,
        "utils/argparse_utils.py": FAKE_ARGPARSE_UTILS,
    }.items():
        path = package / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [
        package,
        package / "entrypoints",
        package / "entrypoints/openai",
        package / "utils",
    ]:
        (directory / "__init__.py").touch()
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert vllm_installed()
    clock = SystemClock()
    assert await vllm_objection({"max-num-seqs": 8, "enable-log-requests": True}, clock) == ""
    objection = await vllm_objection({"max-num-partial-prefills": 2}, clock)
    assert "unrecognized arguments: --max-num-partial-prefills 2" in objection
