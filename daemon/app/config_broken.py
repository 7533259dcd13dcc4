"""How every command says that a configuration or policy file is broken: one problem per line.

Each line is ``path:line:col: key: message`` on stderr (what editors, CI annotators and
systemd's journal read), and the exit status is 78 (EX_CONFIG), whichever command found it.
"""

from __future__ import annotations

import sys

from daemon.app.defaults import EXIT_CONFIG
from daemon.core.errors import ConfigError


def config_broken(error: ConfigError) -> int:
    """Print every problem of ``error`` on stderr; return the exit status for it."""
    for issue in error.issues:
        print(issue.render(), file=sys.stderr)
    return EXIT_CONFIG
