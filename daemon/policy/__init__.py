"""Policy specs and their pure evaluation."""

from __future__ import annotations
