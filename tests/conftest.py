"""Test-suite-wide fixtures."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Unix socket paths are limited to 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="vg-") as directory:
        yield Path(directory)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test of an ``xdist_group`` its group in its id, as ``--dist loadgroup`` needs.

    pytest-xdist 3.8.0 does this by setting ``item._nodeid``, which pytest 9 no longer reads
    (an item's id is ``item._id`` now): without this hook every group was ignored, and a
    module's fixture for a group (the real-vLLM tier's server, the fleet chaos matrix's
    cluster) was built once on each worker. Drop it when xdist sets the id pytest reads.
    """
    if not config.getoption("loadgroup", default=False):  # set on xdist's workers only
        return
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(sorted(names))}")
