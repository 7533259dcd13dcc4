"""The uv that scripts/bootstrap keeps (the lock-file installer), for tests that build and install.

It lives in a virtual environment of its own under the project's cache, one per pinned version;
the version is read from scripts/bootstrap so that the two never disagree. Under CI a missing
one fails the test instead of skipping it (``make test`` runs the bootstrap first).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def locked_uv() -> Path:
    """The path of the bootstrap's uv; skip the test without it, or fail when CI=true."""
    found = re.search(r"^uv_version=(\S+)$", (REPO / "scripts" / "bootstrap").read_text(), re.M)
    assert found, "scripts/bootstrap no longer pins uv_version="
    cache = os.environ.get("VLLM_GOVERNOR_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm-governor"
    )
    uv = Path(cache) / f"uv-{found.group(1)}" / "bin" / "uv"
    if uv.is_file():
        return uv
    message = f"uv {found.group(1)} is not at {uv} (scripts/bootstrap installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
