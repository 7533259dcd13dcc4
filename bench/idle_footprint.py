"""Idle footprint of ``vllm-governor run`` next to a bare asyncio process, measured side by side.

Both processes run at the same time for the same window, under the same interpreter, so the
machine's noise hits them alike. For each: resident memory (RSS: the last sample and the peak)
and CPU time over the window after the governor has said READY=1, as a share of one core.
The goals of the foundation issue are under 50 MB RSS and under 1% of a core.

    .venv/bin/python -m bench.idle_footprint [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class Footprint:
    """What one process cost over the window."""

    name: str
    rss_mib: float
    peak_rss_mib: float
    cpu_percent_of_a_core: float


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB."""
    resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident_pages * PAGE_KIB / 1024


def example_config(scratch: Path) -> Path:
    """config.example.toml, with the root-owned paths and the port moved into ``scratch``."""
    text = (ROOT / "config.example.toml").read_text()
    document = tomllib.loads(text)
    text = text.replace(document["governor"]["state_dir"], str(scratch / "state"))
    text = text.replace(document["control"]["socket_path"], str(scratch / "control.sock"))
    # The example's policy directory is where a package installs it; this checkout has its own.
    for directory in document["governor"]["policy_dirs"]:
        text = text.replace(f'"{directory}"', f'"{ROOT / "policies"}"')
    text = text.replace(
        f"listen_port = {document['metrics']['listen_port']}", f"listen_port = {free_port()}"
    )
    path = scratch / "config.toml"
    path.write_text(text)
    return path


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def measure(seconds: float) -> list[Footprint]:
    """Run both processes side by side and sample them once a second."""
    with tempfile.TemporaryDirectory(prefix="vg-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        address = f"vg-bench-{uuid.uuid4().hex}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind("\0" + address)
            env = {**os.environ, "NOTIFY_SOCKET": "@" + address, "WATCHDOG_USEC": "30000000"}
            governor = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "daemon.app.cli",
                    "run",
                    "--config",
                    str(example_config(scratch)),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            notify.settimeout(60)
            while b"READY=1" not in notify.recv(4096).split(b"\n"):
                pass
            bare = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"import asyncio; asyncio.run(asyncio.sleep({seconds + 30}))",
                ]
            )
            time.sleep(1.0)  # let the bare process finish importing, as the governor has
            processes = {"vllm-governor run (example config)": governor, "bare asyncio sleep": bare}
            try:
                return _sample(processes, seconds)
            finally:
                for process in processes.values():
                    process.terminate()
                    process.wait()


def _sample(processes: dict[str, subprocess.Popen[bytes]], seconds: float) -> list[Footprint]:
    cpu_start = {name: cpu_seconds(p.pid) for name, p in processes.items()}
    peaks = {name: rss_mib(p.pid) for name, p in processes.items()}
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        time.sleep(1.0)
        for name, process in processes.items():
            peaks[name] = max(peaks[name], rss_mib(process.pid))
    elapsed = time.monotonic() - started
    return [
        Footprint(
            name=name,
            rss_mib=round(rss_mib(process.pid), 1),
            peak_rss_mib=round(peaks[name], 1),
            cpu_percent_of_a_core=round(
                100 * (cpu_seconds(process.pid) - cpu_start[name]) / elapsed, 3
            ),
        )
        for name, process in processes.items()
    ]


def main() -> None:
    """Measure, print a table with ratios, and optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    governor, bare = measure(args.seconds)
    print(f"idle footprint over {args.seconds:.0f} s, sampled once a second, same interpreter")
    print(f"{'process':<36} {'RSS MiB':>8} {'peak MiB':>9} {'CPU % core':>11}")
    for row in (governor, bare):
        print(
            f"{row.name:<36} {row.rss_mib:>8} {row.peak_rss_mib:>9} {row.cpu_percent_of_a_core:>11}"
        )
    cpu_ratio = governor.cpu_percent_of_a_core / max(bare.cpu_percent_of_a_core, 0.001)
    print(f"ratio governor/bare: RSS x{governor.rss_mib / bare.rss_mib:.2f}, CPU x{cpu_ratio:.1f}")
    goals = governor.peak_rss_mib < 50 and governor.cpu_percent_of_a_core < 1.0
    print(f"goals (< 50 MB RSS, < 1% of a core): {'met' if goals else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps([asdict(governor), asdict(bare)], indent=2))


if __name__ == "__main__":
    main()
