"""The top layer: command line, systemd glue and logging set-up."""

from __future__ import annotations
