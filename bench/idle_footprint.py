"""Footprint of ``vllm-governor run`` next to a bare asyncio process, measured side by side.

Both processes run at the same time for the same window, under the same interpreter, so the
machine's noise hits them alike. For each: resident memory (RSS) sampled every few seconds
(the figures at 60 s, 120 s and every five minutes, the peak, and the slope over the second
half: flat or growing) and CPU time over the window after the governor has said READY=1, as a
share of one core (CPU seconds per wall second, so a busy machine does not inflate it).

With ``--servers N`` the governor governs N live ``sim serve`` processes, each under a light
steady load of its own (so its /metrics page carries filled histograms), scraped every 2 s;
without, it runs the example configuration, whose one server is unreachable. The goals (issue
15, finding 10): at most 50 MB RSS and 1% of a core with four live servers, 2% with sixteen.

    .venv/bin/python -m bench.idle_footprint --servers 4 [--seconds 1800]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.footprint_series import RssSummary, summarise
from tests.support.sim_serve import SimProcess, sim_serve

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
MIB_TO_MB = 1.048576


# A light steady load per server: a request a second of short prompts and answers keeps the
# histograms (TTFT, ITL, e2e, token counts) filling, as a quiet production server's do.
STEADY_LOAD = """\
name: light-steady
duration_s: {duration_s}
seed: {seed}
arrivals: {{rate_rps: 1}}
prompt_tokens: {{median: 300, p90: 800, max: 2000}}
output_tokens: {{median: 60, p90: 150, max: 400}}
"""


@dataclass
class Footprint:
    """What one process cost over the window."""

    name: str
    rss: RssSummary
    cpu_percent_of_a_core: float
    cpu_percent_second_half: float


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB."""
    resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident_pages * PAGE_KIB / 1024


def example_config(scratch: Path, servers: list[SimProcess]) -> Path:
    """config.example.toml, with the root-owned paths and the port moved into ``scratch``.

    With ``servers``, its [[vllm]] and [[http_log_level]] tables give way to one [[vllm]] per
    live server, scraped every 2 s, its knobs read from the server's own YAML, in dry-run.
    """
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
    if servers:
        # The example's fleet groups name its own server, which the live servers replace.
        groups = document.get("fleet", {}).get("groups", {})
        if groups:
            shown = ", ".join(f'{name} = "{group}"' for name, group in groups.items())
            text = text.replace(f"groups = {{ {shown} }}", "groups = {}")
        text = text[: text.index("\n[[vllm]]\n")] + "".join(
            f'\n[[vllm]]\nname = "sim-{index}"\nurl = "http://127.0.0.1:{server.port}"\n'
            f'scrape_interval_s = 2.0\nconfig_path = "{server.log_path.parent / "vllm.yaml"}"\n'
            f'unit = "vllm-sim-{index}.service"\nmode = "dry-run"\n'
            for index, server in enumerate(servers)
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


def measure(seconds: float, servers: int, every_s: float) -> tuple[list[Footprint], str]:
    """Start ``servers`` live sims, then both processes side by side; sample every ``every_s``.

    Returns the footprints and what the governor's own /metrics said of its sources at the end.
    """
    with tempfile.TemporaryDirectory(prefix="vg-bench-") as scratch_dir, ExitStack() as sims:
        scratch = Path(scratch_dir)
        live = []
        for index in range(servers):
            directory = scratch / f"sim-{index}"
            directory.mkdir()
            load = STEADY_LOAD.format(duration_s=int(seconds + 600), seed=index + 1)
            live.append(sims.enter_context(sim_serve(directory, "max-num-seqs: 64\n", load=load)))
        config = example_config(scratch, live)
        address = f"vg-bench-{uuid.uuid4().hex}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind("\0" + address)
            env = {**os.environ, "NOTIFY_SOCKET": "@" + address, "WATCHDOG_USEC": "30000000"}
            governor = subprocess.Popen(
                [sys.executable, "-m", "daemon.app.cli", "run", "--config", str(config)],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            notify.settimeout(60)
            while b"READY=1" not in notify.recv(4096).split(b"\n"):
                pass
            # Keep reading, as systemd does: the governor's watchdog pings and status lines
            # would otherwise fill the socket's queue (ten datagrams) and block its sends.
            threading.Thread(target=_drain, args=(notify,), daemon=True).start()
            bare = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"import asyncio; asyncio.run(asyncio.sleep({seconds + 60}))",
                ]
            )
            time.sleep(1.0)  # let the bare process finish importing, as the governor has
            label = (
                f"vllm-governor run ({servers} live servers)" if servers else "vllm-governor run"
            )
            processes = {label: governor, "bare asyncio sleep": bare}
            try:
                footprints = _sample(processes, seconds, every_s)
                return footprints, _sources_seen(config)
            finally:
                for process in processes.values():
                    process.terminate()
                    process.wait()


def _drain(notify: socket.socket) -> None:
    """Read and drop what the governor sends to its notify socket, until the socket closes."""
    notify.settimeout(None)
    with contextlib.suppress(OSError):
        while True:
            notify.recv(4096)


def _sample(
    processes: dict[str, subprocess.Popen[bytes]], seconds: float, every_s: float
) -> list[Footprint]:
    cpu = {name: [(0.0, cpu_seconds(p.pid))] for name, p in processes.items()}
    rss = {name: [(0.0, rss_mib(p.pid))] for name, p in processes.items()}
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(every_s, seconds - elapsed))
        now = time.monotonic() - started
        for name, process in processes.items():
            rss[name].append((now, rss_mib(process.pid)))
            cpu[name].append((now, cpu_seconds(process.pid)))
    return [
        Footprint(
            name=name,
            rss=summarise(rss[name]),
            cpu_percent_of_a_core=_cpu_share(cpu[name], 0.0),
            cpu_percent_second_half=_cpu_share(cpu[name], cpu[name][-1][0] / 2),
        )
        for name in processes
    ]


def _cpu_share(samples: list[tuple[float, float]], since: float) -> float:
    """CPU seconds per wall second, in percent of one core, from the first sample at ``since``."""
    t0, cpu0 = next((t, c) for t, c in samples if t >= since)
    t1, cpu1 = samples[-1]
    return round(100 * (cpu1 - cpu0) / max(t1 - t0, 1e-9), 3)


def _sources_seen(config: Path) -> str:
    """The governor's source_up, source_polls and signal_series lines, read off its /metrics."""
    port = tomllib.loads(config.read_text())["metrics"]["listen_port"]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        page = answer.read().decode()
    wanted = (
        "vllm_governor_source_up{",
        "vllm_governor_source_polls_total{",
        "vllm_governor_signal_series ",
    )
    return "\n".join(line for line in page.splitlines() if line.startswith(wanted))


def _ok_vllm_polls(metrics_lines: str) -> float:
    """Successful polls of every vLLM source since the governor started."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics_lines.splitlines()
        if line.startswith("vllm_governor_source_polls_total{")
        and 'outcome="ok"' in line
        and 'source="vllm/' in line
    )


def _print_row(row: Footprint) -> None:
    marks = "  ".join(f"{t:.0f}s {mib:.1f}" for t, mib in row.rss.marks)
    print(f"{row.name}")
    print(f"  RSS MiB at: {marks}")
    print(
        f"  RSS MiB last {row.rss.last_mib:.1f}, peak {row.rss.peak_mib:.1f}; second half "
        f"{row.rss.slope_mib_per_hour:+.2f} MiB/h ({row.rss.trend}), last quarter "
        f"{row.rss.last_quarter_mib_per_hour:+.2f} MiB/h"
    )
    print(
        f"  CPU % of a core: {row.cpu_percent_of_a_core} over the window, "
        f"{row.cpu_percent_second_half} over its second half"
    )


def main() -> None:
    """Measure, print the series and ratios, and optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=0, help="live sim servers (0: example)")
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    (governor, bare), sources = measure(args.seconds, args.servers, args.every)
    print(f"footprint over {args.seconds:.0f} s, sampled every {args.every:.0f} s")
    for row in (governor, bare):
        _print_row(row)
    print("the governor's own /metrics at the end:")
    print("  " + sources.replace("\n", "\n  "))
    if args.servers:
        # A loaded machine answers slower and some scrapes time out: fewer scrapes, less CPU.
        scraped = _ok_vllm_polls(sources)
        expected = args.servers * args.seconds / 2.0
        print(
            f"vLLM scrapes that succeeded: {scraped:.0f}, {scraped / expected:.0%} of one per 2 s"
        )
    cpu_ratio = governor.cpu_percent_of_a_core / max(bare.cpu_percent_of_a_core, 0.001)
    rss_ratio = governor.rss.peak_mib / bare.rss.peak_mib
    print(f"ratio governor/bare: peak RSS x{rss_ratio:.2f}, CPU x{cpu_ratio:.1f}")
    cpu_goal = 2.0 if args.servers > 4 else 1.0
    met = governor.rss.peak_mib * MIB_TO_MB <= 50 and governor.cpu_percent_of_a_core <= cpu_goal
    print(
        f"goals (<= 50 MB RSS, <= {cpu_goal:g}% of a core): peak "
        f"{governor.rss.peak_mib * MIB_TO_MB:.1f} MB, CPU {governor.cpu_percent_of_a_core}%: "
        f"{'met' if met else 'NOT met'}"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(governor), asdict(bare)], indent=2))


if __name__ == "__main__":
    main()
