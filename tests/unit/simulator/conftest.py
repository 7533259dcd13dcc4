"""Fixtures of the simulator's unit tests: the shipped profiles, loaded once."""

from __future__ import annotations

import pytest

from simulator.profiles import EngineProfile, load_profile


@pytest.fixture(scope="session")
def profile_8b() -> EngineProfile:
    return load_profile("llama-3.1-8b-h100-tp1")


@pytest.fixture(scope="session")
def profile_70b() -> EngineProfile:
    return load_profile("llama-3.3-70b-h100-tp4")
