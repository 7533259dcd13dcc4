"""One real vLLM for the whole tier: starting one costs ~45 s of both cores.

The tests that only read it run first (pytest orders by file name: ``test_a_*``); the ones that
restart it leave it serving on some config, and each reads the config it finds.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.real_vllm import SHUTDOWN_TIMEOUT_S, SMALL_POOL, RealVllm, real_vllm

INITIAL_CONFIG = (
    "# the unit's --config\nmax-num-seqs: 16\nmax-num-batched-tokens: 2048\n"
    f"shutdown-timeout: {SHUTDOWN_TIMEOUT_S}\n{SMALL_POOL}"
)


@pytest.fixture(scope="session")
def server() -> Iterator[RealVllm]:
    """A real vLLM under supervisord, shared by the tier."""
    with (
        tempfile.TemporaryDirectory(prefix="vg-real-") as directory,
        real_vllm(Path(directory), INITIAL_CONFIG) as running,
    ):
        yield running
