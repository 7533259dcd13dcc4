"""Defaults of the command line that several subcommands share."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CONFIG = Path(os.environ.get("VLLM_GOVERNOR_CONFIG", "/etc/vllm-governor/config.toml"))

# Exit statuses, one convention for every command (README.md, "Exit statuses"), from sysexits.h
# where one fits, so that scripts and systemd can tell them apart (the unit sets
# RestartPreventExitStatus=78: restarting cannot fix a broken configuration).
EXIT_OK = 0
# The command ran and did not succeed: no daemon answered, a policy test failed, a change or
# click was refused (EXIT_REFUSED below), a recording could not be read.
EXIT_FAILURE = 1
# The command line itself is wrong (argparse's own status).
EXIT_USAGE = 2
# 'run' only: the shutdown did not finish within governor.shutdown_deadline_s (EX_SOFTWARE).
EXIT_DEADLINE = 70
# The configuration or a policy file is broken, whichever command read it, 'check' included
# (EX_CONFIG): each problem is printed as path:line:col: key: message.
EXIT_CONFIG = 78
# A change, click or plan the governor refused: a failure for scripts, which must not go on as
# if it had been accepted.
EXIT_REFUSED = EXIT_FAILURE
