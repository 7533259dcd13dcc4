"""Freezes, for the vLLM actuator's preflight: the shared reader of :mod:`daemon.api`.

The format (``STATE_DIR/freeze``, ``STATE_DIR/freeze.NAME``, an optional expiry on the first
line) is the same for every actuator, so it lives behind the facade; this name stays for the
vLLM actuator's imports.
"""

from __future__ import annotations

from daemon.api import freeze_reason

__all__ = ["freeze_reason"]
