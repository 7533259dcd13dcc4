"""One module per ``vllm-governor`` subcommand; each exposes ``register`` and ``main``."""

from __future__ import annotations
