"""Fixtures of the end-to-end tests shared by several modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.installed_wheel import DemoRun, Installed, install, start_demo


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel, built and installed into a fresh virtual environment (a few seconds)."""
    return install(tmp_path_factory.mktemp("installed"))


@pytest.fixture(scope="session")
def installed_demo(installed: Installed) -> Iterator[DemoRun]:
    """The demo from the installed package, started once, in the background.

    The first test that asks for it starts it (``tests/e2e/test_demo.py``'s, then
    ``tests/e2e/test_installed_package.py``'s first), so that the tests after it run while
    the demo does, at the lowest priority; ``tests/e2e/test_installed_package_demo.py`` waits
    for its end and asserts its story.
    """
    run = start_demo(installed)
    yield run
    run.stop()
