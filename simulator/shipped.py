"""What ships with the simulator, cheap to ask: profile names and the default address.

Kept free of heavy imports so that the command line can list them in its help text without
loading the model.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# The data lies inside the package, in a checkout and in an installed wheel alike. A package
# imported from a zip archive would have no paths on disk; the simulator is not installed so.
_PACKAGE = Path(str(resources.files("simulator")))
PROFILE_DIR = _PACKAGE / "profiles"
WORKLOAD_DIR = _PACKAGE / "workloads"
TRACE_DIR = _PACKAGE / "traces"
DEFAULT_HOST = "127.0.0.1"  # loopback: /metrics and /health need no authentication
DEFAULT_PORT = 8000


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with the simulator."""
    return sorted(path.stem for path in PROFILE_DIR.glob("*.yaml"))


def shipped_input(spec: str | Path) -> Path:
    """``spec`` as a path when it is a file, else the shipped workload or trace of that name.

    ``burst-and-long-outputs`` finds ``workloads/burst-and-long-outputs.yaml`` and
    ``azure-llm-2023-conv`` finds ``traces/azure-llm-2023-conv.csv``; a name that matches
    nothing comes back unchanged, so the caller's "cannot read the file" names what was asked.
    """
    path = Path(spec)
    if path.is_file():
        return path
    for candidate in (WORKLOAD_DIR / f"{spec}.yaml", TRACE_DIR / f"{spec}.csv"):
        if candidate.is_file():
            return candidate
    return path
