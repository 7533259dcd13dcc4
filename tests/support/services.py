"""Finding the real programs tests need; under CI a missing one fails instead of skipping."""

from __future__ import annotations

import itertools
import os
import shutil
import socket

import pytest


def require_command(name: str) -> str:
    """The path of executable ``name``; skip the test without it, or fail when CI=true."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is not None:
        return path
    message = f"{name} is not installed (scripts/install-test-services installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


# Ports are handed out from a block of this process's own, below the kernel's ephemeral range
# (32768-60999 by default), never twice in a row. Asking the kernel for port 0 and closing the
# probe returned a port that another pytest-xdist worker (or this process's next call: an etcd
# member got the same peer and client port) could take before the server bound it.
_BLOCK = 4000
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_FIRST = 20000 + (_WORKER % 3) * _BLOCK  # 20000-31999 for workers gw0-gw2, then again
# Each process starts at its own place in the block (two pytest runs on one machine, both as
# gw0, would otherwise probe the same ports in the same order and race to bind them).
_handed_out = itertools.count(os.getpid() % _BLOCK)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, from this worker's block."""
    for _ in range(_BLOCK):
        port = _FIRST + next(_handed_out) % _BLOCK
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or closing): the next one
            return port
    raise RuntimeError(f"no free port in {_FIRST}-{_FIRST + _BLOCK - 1}")
