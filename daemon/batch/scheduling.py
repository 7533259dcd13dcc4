"""Which scheduling policy a vLLM server runs: ``priority`` or ``fcfs``, and how that is known.

vLLM orders requests by their ``priority`` (an integer, lower runs first, default 0) only when
it was started with ``--scheduling-policy priority``. Under the default ``fcfs`` the field is
ignored by some versions (0.32's CPU build answers 200) and refused by others (HTTP 400 "Got
priority N but Priority scheduling is not enabled", the check of older engines): nothing to
gain and a line to lose. So the governor sends batch requests at the lowest
priority only to a server it *knows* runs priority scheduling, from, in this order:

1. the server's own start-up line ``non-default args: {...}`` in ``server_log_file`` (the
   last one: the server running now). It states every option given, on the command line or in
   the ``--config`` file; a line without ``scheduling_policy`` means the default, ``fcfs``.
   This is the running server's word, so it is trusted first (a flag on the unit's command
   line that overrides the file shows here, and nowhere else).
2. the ``--config`` file (``config_path``): ``scheduling-policy: priority``. It says what the
   server was started with as long as nothing overrides it on the command line.
3. otherwise: unknown, treated as ``fcfs`` (no priority is sent, and the lane's tight bound
   applies: the safe side).

``/metrics``, ``/server_info`` and ``vllm:cache_config_info`` do not carry the scheduling
policy (``facts``: probed on the CPU build), so there is no live way to ask.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

PRIORITY = "priority"
FCFS = "fcfs"

_STATED = re.compile(r"non-default args: (\{.*\})\s*$", re.MULTILINE)
_POLICY_ITEM = re.compile(r"""['"]scheduling_policy['"]\s*:\s*['"](\w+)['"]""")
# The start-up line is near a log's start, but a long-lived log has rotated lines after it:
# the tail read is bounded, and a line that is not in it is "not stated".
TAIL_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The scheduling policy of one server, and where the governor read it.

    Attributes:
        policy: ``priority`` or ``fcfs`` (``fcfs`` also when unknown: the safe side).
        source: For people: the log line, the config file, or why it is unknown.
    """

    policy: str
    source: str

    @property
    def priority(self) -> bool:
        """Whether batch requests may carry a priority."""
        return self.policy == PRIORITY


def stated_policy(log_text: str) -> str | None:
    """The policy the last ``non-default args`` line states; None when there is no such line."""
    lines = _STATED.findall(log_text)
    if not lines:
        return None
    found = _POLICY_ITEM.search(lines[-1])
    return found.group(1) if found else FCFS


def configured_policy(config_text: str) -> str | None:
    """The ``scheduling-policy`` of a vLLM ``--config`` file; None when it does not say."""
    try:
        options = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return None
    if not isinstance(options, dict):
        return None
    value = options.get("scheduling-policy", options.get("scheduling_policy"))
    return value if isinstance(value, str) else None


def read_scheduling(server_log_file: Path | None, config_path: Path | None) -> Scheduling:
    """What the server's log, else its config file, says; unknown reads as ``fcfs``."""
    if server_log_file is not None:
        text = _tail(server_log_file)
        policy = None if text is None else stated_policy(text)
        if policy is not None:
            return Scheduling(policy, f"the server's start-up line in {server_log_file}")
    if config_path is not None:
        try:
            policy = configured_policy(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            policy = None
        if policy is not None:
            return Scheduling(policy, f"scheduling-policy in {config_path}")
        if config_path.is_file():
            return Scheduling(FCFS, f"{config_path} sets no scheduling-policy (vLLM's default)")
    return Scheduling(FCFS, "unknown (no server_log_file or config_path says): taken as fcfs")


def _tail(path: Path) -> str | None:
    try:
        with path.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - TAIL_BYTES))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
