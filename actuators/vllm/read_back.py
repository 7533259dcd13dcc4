"""Reading back what a restarted vLLM server says it runs with.

vLLM's API server logs one line as it starts: ``non-default args: {...}``, every option it
parsed from its command line and its ``--config`` file, after merging them (command line beats
file). That line is the only place where the *running server* states its scheduler settings:
``vllm:cache_config_info`` carries the cache configuration but no ``max_num_seqs`` or token
budget, ``/server_info`` needs development mode (which also opens endpoints nobody should
expose) and leaves them out too, and the process's command line shows ``--config PATH``, not
what the file said when it was read. So the governor trusts that line: it catches what no
file check can, such as a flag on the unit's ``ExecStart`` that overrides the file.

Its limits are explicit states, not guesses: the line is logged at INFO, so a server running
at ``VLLM_LOGGING_LEVEL=WARNING`` does not state it (``unstated``); where the server's output
cannot be read, the read-back is ``unavailable``. Neither fails a change (the signal
verification still runs); a ``contradicted`` read-back does, and the change is reverted.
Only the keys the change set are compared, since vLLM leaves out options equal to its defaults.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from actuators.vllm.config_text import read_yaml_options
from actuators.vllm.plan import ChangePlan
from actuators.vllm.restart import run_command
from daemon.api import Clock, VllmInstance

CONFIRMED, CONTRADICTED, UNSTATED, UNAVAILABLE = (
    "confirmed",
    "contradicted",
    "unstated",
    "unavailable",
)
_STATED = re.compile(r"non-default args: (\{.*\})\s*$", re.MULTILINE)
# Enough for vLLM's whole start-up output many times over; a log is never read unbounded.
_MOST_BYTES = 8 * 1024 * 1024
_LOG_COMMAND_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ReadBack:
    """What the server said, compared with what the change wrote.

    Attributes:
        state: ``confirmed``, ``contradicted``, ``unstated`` or ``unavailable``.
        detail: For people.
        stated: The compared keys as the server stated them.
    """

    state: str
    detail: str
    stated: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """For the journal."""
        return asdict(self)


def log_mark(instance: VllmInstance) -> int | None:
    """Where the server's log file ends now (read from there after the restart)."""
    if instance.server_log_file is None:
        return None
    try:
        return instance.server_log_file.stat().st_size
    except OSError:
        return 0


def stated_args(text: str) -> dict[str, Any] | None:
    """The last ``non-default args`` mapping in ``text``; None when there is none or it is bad.

    ``ast.literal_eval`` reads literals only: nothing in a log line is ever executed.
    """
    matches = _STATED.findall(text)
    if not matches:
        return None
    try:
        value = ast.literal_eval(matches[-1])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def compare(stated: Mapping[str, Any], expected: Mapping[str, Any]) -> ReadBack:
    """Compare the server's statement with the options the change wrote (YAML keys)."""
    seen: dict[str, Any] = {}
    wrong: list[str] = []
    for key, wanted in expected.items():
        name = key.replace("-", "_")
        if name not in stated:
            continue
        seen[name] = stated[name]
        if not _same(stated[name], wanted):
            wrong.append(f"{name}={stated[name]!r}, not {wanted!r}")
    if wrong:
        detail = (
            f"the server says it runs with {', '.join(wrong)}: another setting (a command-line "
            "flag of the unit?) overrides the config file"
        )
        return ReadBack(CONTRADICTED, detail, seen)
    if seen:
        return ReadBack(CONFIRMED, f"the server says it runs with {_shown(seen)}", seen)
    return ReadBack(UNSTATED, "the server's start-up line states none of the changed options")


async def read_back(
    instance: VllmInstance, plan: ChangePlan, facts: Mapping[str, Any], clock: Clock
) -> ReadBack:
    """Read the server's output since the restart and compare it with the plan's YAML."""
    expected = _changed_options(plan)
    if not expected:
        return ReadBack(UNSTATED, "the change set no option of the config file")
    text = await _server_output(instance, facts, clock)
    if text is None:
        return ReadBack(UNAVAILABLE, "the server's output could not be read")
    stated = stated_args(text)
    if stated is None:
        why = "no 'non-default args' line since the restart (a log level above INFO hides it)"
        return ReadBack(UNSTATED, why)
    return compare(stated, expected)


async def _server_output(
    instance: VllmInstance, facts: Mapping[str, Any], clock: Clock
) -> str | None:
    if instance.server_log_file is not None:
        return _read_from(instance.server_log_file, int(facts.get("log_mark") or 0))
    if not instance.unit:
        return None
    since = float(facts.get("restart_at") or clock.wall().timestamp())
    argv = instance.server_log_argv(since)
    result = await run_command(argv, _LOG_COMMAND_TIMEOUT_S, clock, output_limit=_MOST_BYTES)
    return result.output if result.ok else None


def _read_from(path: Path, offset: int) -> str | None:
    try:
        with path.open("rb") as log:
            size = log.seek(0, 2)
            # A file shorter than the mark was rotated or truncated: read it whole.
            log.seek(offset if offset <= size else 0)
            return log.read(_MOST_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def _changed_options(plan: ChangePlan) -> dict[str, Any]:
    """The YAML options whose value the change sets (present in the new file, changed)."""
    if not plan.files:
        return {}
    yaml = plan.files[0]
    where = str(yaml.path)
    new = read_yaml_options(yaml.new_text, where)
    old = read_yaml_options(yaml.old.text, where) if yaml.old.exists else {}
    return {key: value for key, value in new.items() if old.get(key) != value}


def _same(stated: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(stated, bool):
        return bool(stated) is bool(wanted)
    if isinstance(wanted, int | float) and isinstance(stated, int | float):
        return float(stated) == float(wanted)
    return str(stated).lower() == str(wanted).lower()


def _shown(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in values.items())
