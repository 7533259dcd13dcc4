"""What ships with the simulator, cheap to ask: profile names and the default address.

Kept free of heavy imports so that the command line can list them in its help text without
loading the model.
"""

from __future__ import annotations

from pathlib import Path

PROFILE_DIR = Path(__file__).with_name("profiles")
DEFAULT_HOST = "127.0.0.1"  # loopback: /metrics and /health need no authentication
DEFAULT_PORT = 8000


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with the simulator."""
    return sorted(path.stem for path in PROFILE_DIR.glob("*.yaml"))
