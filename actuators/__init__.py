"""Actuators change vLLM servers; they see the governor only through ``daemon.api``."""

from __future__ import annotations
