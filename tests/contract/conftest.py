"""Fixtures shared by the contract tests of sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.nvml_stub import build_stub


@pytest.fixture(scope="session")
def nvml_stub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stub libnvidia-ml.so.1 with every symbol, compiled once per test session."""
    return build_stub(tmp_path_factory.mktemp("nvml-stub"))


@pytest.fixture(scope="session")
def nvml_stub_old_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stub lacking nvmlDeviceGetTotalEccErrors and ...GetCurrentClocksEventReasons."""
    return build_stub(tmp_path_factory.mktemp("nvml-stub-old"), omit=("ECC", "CLOCK_EVENTS"))
