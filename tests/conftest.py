"""Test-suite-wide fixtures."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Unix socket paths are limited to 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="vg-") as directory:
        yield Path(directory)
