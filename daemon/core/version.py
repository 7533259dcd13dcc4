"""The governor's version, read by the build backend and by ``vllm-governor --version``."""

from __future__ import annotations

__version__ = "0.1.0"
