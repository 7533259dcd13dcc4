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
from tests.support.xdist_groups import HEAVY

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


def pytest_itemcollected(item: pytest.Item) -> None:
    """Keep the tier on one pytest-xdist worker, in file order (``scripts/test`` runs two).

    Another worker would start a second real vLLM for itself (the fixture is per process), and
    two of them would fight over the two cores; in file order, the tests that only read the
    server still run before the ones that restart it. (Marked as each test is collected, so
    that the suite's hook in ``tests/conftest.py`` finds the group and writes it into the id.)
    """
    if item.path.is_relative_to(Path(__file__).parent):
        item.add_marker(HEAVY)
