"""The demo's files, written before anything starts: workload, vLLM YAML, pack, config.toml.

The generated config.toml is validated here with the governor's own loader, so that a broken
one is an error naming its problems rather than a daemon that exits at start.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from daemon.app.demo.children import DemoError
from daemon.app.demo.log_volume import LogVolume, plan_volume, write_older_logs
from daemon.app.demo.pack_timing import Retimed, write_demo_pack, write_demo_profile
from daemon.app.demo.scenario import (
    LOADING_S,
    PROFILE,
    SHUTDOWN_TIMEOUT_S,
    Paths,
    governor_config,
    scaled_workload,
    write_env_file,
    write_vllm_yaml,
    write_workload,
)
from daemon.core.config_files import load_config
from daemon.core.errors import ConfigError
from simulator.arrivals import Arrival
from simulator.synthetic_workloads import WorkloadSpec

# The verification window at the default duration; it scales with --duration, from 10 s.
# 15 s: the disk act's change, the run's second restart, is verified before the run ends.
VERIFY_WINDOW_S = 15.0
DEFAULT_DURATION_S = 180.0


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the files say, for the rest of the run.

    Attributes:
        spec: The workload, scaled to the duration.
        arrival_times: Its arrivals' times (seconds from its time 0), sorted.
        sim_port: The port the simulated server listens on.
        retimed: What the demo's copy of the pack changed of its acting policies.
        arrivals: The workload's arrivals, sorted.
        log_volume: The log directory's budget and older logs (the disk act).
    """

    spec: WorkloadSpec
    arrival_times: list[float]
    sim_port: int
    retimed: list[Retimed]
    arrivals: list[Arrival]
    log_volume: LogVolume


def prepare(paths: Paths, duration_s: float, policies: Path) -> Prepared:
    """Write every file of the run into ``paths.scratch``.

    Raises:
        DemoError: The generated config.toml does not validate.
    """
    spec = scaled_workload(duration_s)
    arrivals = write_workload(spec, paths.workload)
    sim_port, metrics_port = free_port(), free_port()
    write_vllm_yaml(paths.vllm_yaml, sim_port)
    write_env_file(paths.env_file)
    volume = plan_volume(arrivals, duration_s)
    write_older_logs(paths.log_dir, volume)
    write_demo_profile(PROFILE, paths.profile, restart_s=SHUTDOWN_TIMEOUT_S + LOADING_S)
    retimed = write_demo_pack(policies, paths.pack, paths.profile, paths.log_dir)
    text = governor_config(
        paths,
        policies=paths.pack,
        sim_port=sim_port,
        metrics_port=metrics_port,
        verify_window_s=max(10.0, VERIFY_WINDOW_S * duration_s / DEFAULT_DURATION_S),
        log_budget_bytes=volume.budget_bytes,
    )
    paths.config.write_text(text, encoding="utf-8")
    try:
        load_config(paths.config)
    except ConfigError as exc:
        problems = "; ".join(issue.render() for issue in exc.issues)
        message = f"the demo's generated config is invalid: {problems}"
        raise DemoError(message) from exc
    times = [arrival.arrived_at for arrival in arrivals]
    return Prepared(spec, times, sim_port, retimed, arrivals, volume)


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
