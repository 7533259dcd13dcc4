"""Defaults of the command line that several subcommands share."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CONFIG = Path(os.environ.get("VLLM_GOVERNOR_CONFIG", "/etc/vllm-governor/config.toml"))

# Exit statuses, from sysexits.h where one fits, so that systemd can tell them apart
# (the unit sets RestartPreventExitStatus=78: restarting cannot fix a broken configuration).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIG = 78
EXIT_DEADLINE = 70
# A change, click or plan the governor refused: a failure for scripts, which must not go on as
# if it had been accepted.
EXIT_REFUSED = EXIT_FAILURE
