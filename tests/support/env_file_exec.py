"""Run a program with the variables of an environment file, as systemd's EnvironmentFile does.

supervisord reads a program's environment once, from its own configuration; a systemd unit
reads its ``EnvironmentFile=`` at every start. This wrapper gives the real vLLM under
supervisord the unit's behaviour, so that a ``VLLM_LOGGING_LEVEL`` the governor writes takes
effect at the next restart::

    python env_file_exec.py ENV_FILE PROGRAM [ARGUMENTS...]

Lines are ``KEY=VALUE``; blank lines and ``#`` comments are skipped; no quoting or expansion.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    """Read the file, then replace this process with the program."""
    env_file, program, *arguments = sys.argv[1:]
    environment = dict(os.environ)
    for line in Path(env_file).read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith("#") and "=" in text:
            key, _, value = text.partition("=")
            environment[key.strip()] = value.strip()
    os.execve(program, [program, *arguments], environment)


if __name__ == "__main__":
    main()
