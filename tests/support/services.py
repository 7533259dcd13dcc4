"""Finding the real programs tests need; under CI a missing one fails instead of skipping."""

from __future__ import annotations

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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
