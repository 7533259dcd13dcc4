"""A second opinion from vLLM's own argument parser, run by vLLM's own interpreter.

The registry knows the flags the governor sets; vLLM's parser knows every flag of the version
actually installed, including those an operator put in the file. vLLM usually lives in a
virtual environment of its own, so ``[[vllm]] python`` names the interpreter to ask (the one
the unit's ``ExecStart`` runs); without it the governor's own interpreter is asked when it can
import ``vllm``, and the check is skipped otherwise. Importing vLLM costs seconds and
gigabytes (torch), so the check runs in a child process.

The new config is handed to the parser as vLLM itself reads it at start: written to a private
temporary file and passed as ``--config``, so vLLM's own YAML handling (types, lists, nested
options) is what is checked. The parser's module moved between releases
(``vllm.entrypoints.openai.cli_args`` until 0.31, ``vllm.entrypoints.launchers.cli_args`` in
0.32); both are tried.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from actuators.vllm.restart import run_command
from daemon.api import Clock

log = logging.getLogger(__name__)

_PARSER_SCRIPT = """
import importlib, sys
try:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    for module in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
        try:
            make_arg_parser = importlib.import_module(module).make_arg_parser
            break
        except ImportError:
            continue
    else:
        raise ImportError("no make_arg_parser in vllm.entrypoints")
except Exception as exc:
    print(f"cannot load vLLM's argument parser: {exc}")
    sys.exit(3)
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
parser.parse_args(["--config", sys.argv[1]])
"""
_REFUSED = 2  # argparse's exit status for a bad command line


def vllm_installed() -> bool:
    """Whether ``import vllm`` would find a package in the governor's own environment."""
    return importlib.util.find_spec("vllm") is not None


async def vllm_objection(
    config_text: str, clock: Clock, python: Path | None = None, timeout_s: float = 120.0
) -> str:
    """What vLLM's parser says against this ``--config`` text; "" when it accepts or is absent.

    Args:
        config_text: The YAML the server would read at its next start.
        clock: The injected clock (bounds the child).
        python: vLLM's interpreter; None to use the governor's own, where vLLM is importable.
        timeout_s: How long the parser may take (importing vLLM takes seconds).
    """
    argv_start: Sequence[str]
    environment: dict[str, str] | None = None
    if python is not None:
        if not os.access(python, os.X_OK):
            return f"the configured vLLM interpreter {python} does not exist or is not executable"
        argv_start = (str(python),)
    elif vllm_installed():
        argv_start = (sys.executable,)
        search_path = os.pathsep.join(entry for entry in sys.path if entry)
        environment = {**os.environ, "PYTHONPATH": search_path}
    else:
        return ""
    with tempfile.TemporaryDirectory(prefix="vllm-governor-parser-") as folder:
        config = Path(folder) / "config.yaml"
        config.write_text(config_text, encoding="utf-8")
        argv = [*argv_start, "-c", _PARSER_SCRIPT, str(config)]
        result = await run_command(argv, timeout_s, clock, env=environment)
    if result.returncode == _REFUSED:
        said = result.output.strip().splitlines()
        return f"vLLM's argument parser refuses the config: {said[-1] if said else ''}"
    if not result.ok:
        # A broken vLLM install is not the config's fault: the registry's checks stand alone.
        log.warning("vLLM's argument parser could not run", extra={"output": result.output})
    return ""
