"""A second opinion from vLLM's own argument parser, where the ``vllm`` package is installed.

The registry knows the flags the governor sets; vLLM's parser knows every flag of the version
actually installed, including those an operator put in the file. Importing vLLM costs seconds
and gigabytes (torch), so the check runs in a child process of the same interpreter, with the
same import path, and only when ``vllm`` is importable; without it the check is skipped.

The file's options become arguments as ``vllm serve --config`` makes them: ``--key value``,
``true`` a bare flag, ``false`` nothing, lists repeated values, mappings JSON.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from actuators.vllm.restart import run_command
from daemon.api import Clock

log = logging.getLogger(__name__)

_PARSER_SCRIPT = """
import json, sys
try:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.openai.cli_args import make_arg_parser
except Exception as exc:
    print(f"cannot load vLLM's argument parser: {exc}")
    sys.exit(3)
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
parser.parse_args(json.loads(sys.argv[1]))
"""
_REFUSED = 2  # argparse's exit status for a bad command line


def vllm_installed() -> bool:
    """Whether ``import vllm`` would find a package."""
    return importlib.util.find_spec("vllm") is not None


def as_arguments(options: Mapping[str, Any]) -> list[str]:
    """The command line ``vllm serve --config`` builds from the file's options."""
    arguments: list[str] = []
    for key, value in options.items():
        if value is True:
            arguments.append(f"--{key}")
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            arguments.extend([f"--{key}", *(str(item) for item in value)])
        elif isinstance(value, dict):
            arguments.extend([f"--{key}", json.dumps(value)])
        else:
            arguments.extend([f"--{key}", str(value)])
    return arguments


async def vllm_objection(options: Mapping[str, Any], clock: Clock, timeout_s: float = 120.0) -> str:
    """What vLLM's parser says against these options; "" when it accepts or is absent."""
    if not vllm_installed():
        return ""
    search_path = os.pathsep.join(entry for entry in sys.path if entry)
    argv = [sys.executable, "-c", _PARSER_SCRIPT, json.dumps(as_arguments(options))]
    environment = {**os.environ, "PYTHONPATH": search_path}
    result = await run_command(argv, timeout_s, clock, env=environment)
    if result.returncode == _REFUSED:
        return f"vLLM's argument parser refuses the config: {result.output.strip()}"
    if not result.ok:
        # A broken vLLM install is not the config's fault: the registry's checks stand alone.
        log.warning("vLLM's argument parser could not run", extra={"output": result.output})
    return ""
