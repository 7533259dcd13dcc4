"""The governor's asynchronous shell: supervisor, long-lived tasks, control socket, own metrics."""

from __future__ import annotations
