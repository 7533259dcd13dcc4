"""The vLLM actuator: retunes vLLM servers managed by systemd (or supervisord) safely."""

from __future__ import annotations
