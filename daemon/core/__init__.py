"""The bottom layer: types, errors, clocks and settings shared by every other layer."""

from __future__ import annotations
