"""What ships with the simulator, cheap to ask: profile names and the default address.

Kept free of heavy imports so that the command line can list them in its help text without
loading the model.
"""

from __future__ import annotations

from pathlib import Path

PROFILE_DIR = Path(__file__).with_name("profiles")
WORKLOAD_DIR = Path(__file__).with_name("workloads")
TRACE_DIR = Path(__file__).with_name("traces")
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
