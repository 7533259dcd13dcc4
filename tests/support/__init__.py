"""Helpers shared by the test layers: real processes, free ports, required services."""

from __future__ import annotations
