"""What the demo runs: the workload, the starting vLLM YAML, the governor's configuration.

The story, in the shipped workload's three minutes (``simulator/workloads/demo-*.yaml``):
a burst of seconds meets the admission gate in front of the server (``[vllm.gate]``, answered
by ``sim serve --gate-socket``), which holds what the server can take and refuses the rest
with a 503 within its queue timeout, so the requests after the burst meet the SLO again.
Then conversation traffic arriving in clumps doubles from 6.5 to 13 requests/s after 30 s, against
a vLLM whose step budget (``max-num-batched-tokens: 256``) is enough before the shift and
prefills too few prompt tokens per step after it. Requests queue, TTFT P95 passes the 2 s SLO
with nothing preempted and TPOT far inside its SLO, and the pack's ``ttft-queue`` asks its
what-if, which proposes a larger budget with the effect it predicts; once approved, the
governor writes the YAML, restarts the server through the demo's stand-in for systemd (``sim
supervise``; the server drains what it holds for up to ``shutdown-timeout``), waits for it,
verifies the change and measures its effect against the prediction. Then the server's log
directory, filled by its request lines, passes the pack's ``log-disk`` threshold, and the
approved change restarts it at WARNING without them (:mod:`~daemon.app.demo.log_volume`).
The acting policies run on the demo's clock (:mod:`~daemon.app.demo.pack_timing`). A longer
``--duration`` scales the workload's times; a duration too short for the story is refused
(:func:`minimum_duration_s`).
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from daemon.app.demo.pack_timing import DEMO_FOR_S, DEMO_WINDOW_S, story_policy
from daemon.policy.loading import load_policies
from daemon.shipped import default_pack
from simulator.arrivals import Arrival
from simulator.shipped import WORKLOAD_DIR
from simulator.synthetic_workloads import WorkloadSpec, generate, load_workload

DEFAULT_PACK = default_pack()
WORKLOAD = WORKLOAD_DIR / "demo-traffic-shift.yaml"
PROFILE = "llama-3.1-8b-h100-tp1"
INSTANCE = "main"
# The serving process starts in seconds (the real 8B engine takes about a minute warm).
LOADING_S = 3.0
# The YAML's shutdown-timeout: a restart drains for this long before it aborts what is left.
# 10 s lets what the server holds at the restart (a few dozen short answers and the queue
# behind them) finish, so the change costs refusals during the drain, not aborted requests.
SHUTDOWN_TIMEOUT_S = 10
STARTING_MAX_NUM_SEQS = 64
# The option the story is about, as the YAML spells it and as the governor names the knob.
TUNED_OPTION = "max-num-batched-tokens"
TUNED_KNOB = "max_num_batched_tokens"
# A small step budget, as set to keep TPOT low: decode tokens share it, so too few prompt
# tokens are prefilled per step once the workload doubles to 13 requests/s.
STARTING_MAX_NUM_BATCHED_TOKENS = 256
# vLLM's default logging level; log-disk raises it to WARNING.
STARTING_LOG_LEVEL = "INFO"
# How often the governor reads the log directory (the pack's default is every 10 s).
HOST_INTERVAL_S = 2.0
# The workload's time 0 is this long after the demo starts: both children are up by then.
START_MARGIN_S = 10.0
# The gate in front of the server's load, as HAProxy's reference config names it, with its
# `timeout queue` (examples/haproxy/haproxy.cfg).
GATE_BACKEND = "vllm"
GATE_SERVER = "main"
GATE_QUEUE_TIMEOUT_S = 1.5
# The project's default SLO per request (what kv-thrash and the summary judge by): TTFT <= 2 s,
# TPOT <= 100 ms, a common interactive-chat target; an operator sets their own.
TTFT_SLO_S = 2.0
TPOT_SLO_S = 0.100
# Besides the story policy's own `for` and window: the shift at 30 s, ~20 s for the queue to
# build and TTFT P95 over its 60 s window to pass the SLO, ~35 s for the what-if, the answer
# and the restart (drain and loading), then the restart's predicted downtime before the effect's
# window starts, and 30 s of slack (the governor looks at tuned changes every 5 s; a loaded
# two-core machine slows every step of the story).
MARGIN_S = 30.0 + 20.0 + 35.0 + SHUTDOWN_TIMEOUT_S + LOADING_S + 30.0


@dataclass(frozen=True, slots=True)
class Paths:
    """Every file and socket of one demo run, inside its temporary directory."""

    scratch: Path

    @property
    def vllm_yaml(self) -> Path:
        """The served model's ``--config`` YAML, which the governor edits."""
        return self.scratch / "vllm.yaml"

    @property
    def pack(self) -> Path:
        """The demo's copy of the policy pack (the story's policy on the demo's clock)."""
        return self.scratch / "policies"

    @property
    def profile(self) -> Path:
        """The demo's engine profile: the shipped one, restarted as the demo's server is."""
        return self.scratch / "profile.yaml"

    @property
    def workload(self) -> Path:
        """The workload, scaled to the duration."""
        return self.scratch / "workload.yaml"

    @property
    def config(self) -> Path:
        """The governor's config.toml."""
        return self.scratch / "config.toml"

    @property
    def control_socket(self) -> Path:
        """The governor's control socket."""
        return self.scratch / "control.sock"

    @property
    def supervisor_socket(self) -> Path:
        """The socket of ``sim supervise``."""
        return self.scratch / "supervisor.sock"

    @property
    def notify_socket(self) -> Path:
        """The datagram socket the daemon notifies, as it would systemd."""
        return self.scratch / "notify.sock"

    @property
    def gate_socket(self) -> Path:
        """The admission gate's runtime socket (HAProxy's API, answered by ``sim serve``)."""
        return self.scratch / "gate.sock"

    @property
    def gate_state(self) -> Path:
        """Where the gate keeps its cap across the server's restarts, as HAProxy's outlives them."""
        return self.scratch / "gate-cap"

    @property
    def sim_summary(self) -> Path:
        """One JSON line per ``sim serve`` process, written as each exits."""
        return self.scratch / "sim-summary.jsonl"

    @property
    def env_file(self) -> Path:
        """The server's environment file (``VLLM_LOGGING_LEVEL``), read at each start."""
        return self.scratch / "vllm.env"

    @property
    def log_dir(self) -> Path:
        """The server's log directory, read against its budget (the disk act)."""
        return self.scratch / "logs"

    @property
    def sim_log(self) -> Path:
        """The output of ``sim supervise`` and its server, in the log directory."""
        return self.log_dir / "vllm.log"

    @property
    def daemon_log(self) -> Path:
        """The daemon's log."""
        return self.scratch / "governor.log"


def scaled_workload(duration_s: float) -> WorkloadSpec:
    """The shipped demo workload with every time multiplied by ``duration_s`` / its own."""
    spec = load_workload(WORKLOAD)
    factor = duration_s / spec.duration_s
    bursts = [
        burst.model_copy(
            update={"start_s": burst.start_s * factor, "duration_s": burst.duration_s * factor}
        )
        for burst in spec.bursts
    ]
    ramps = [
        ramp.model_copy(
            update={"start_s": ramp.start_s * factor, "duration_s": ramp.duration_s * factor}
        )
        for ramp in spec.ramps
    ]
    phases = [
        phase.model_copy(
            update={"start_s": phase.start_s * factor, "duration_s": phase.duration_s * factor}
        )
        for phase in spec.phases
    ]
    long_outputs = spec.long_outputs
    if long_outputs is not None:
        window = long_outputs.duration_s
        long_outputs = long_outputs.model_copy(
            update={
                "start_s": long_outputs.start_s * factor,
                "duration_s": None if window is None else window * factor,
            }
        )
    return spec.model_copy(
        update={
            "duration_s": duration_s,
            "bursts": bursts,
            "ramps": ramps,
            "phases": phases,
            "long_outputs": long_outputs,
        }
    )


def minimum_duration_s(policies: Path) -> tuple[float, str]:
    """The shortest ``--duration`` in which the story can be told, and why, in words.

    With the story's policy (``ttft-queue``), on the demo's clock: its ``for``, its window when
    it tunes (the effect is measured over as long once the change is in force; the traffic it
    replays before is what ran during the margin) and the margin.
    Without it, the acting policy that waits least and the margin; a pack that cannot act at
    all asks only for the margin.
    """
    specs = load_policies([policies]).specs
    acting = [spec for spec in specs if spec.action is not None and not spec.shadow]
    story = story_policy(specs)
    if story is not None:
        tunes = story.action is not None and story.action.tune is not None
        wait = DEMO_FOR_S + (DEMO_WINDOW_S if tunes else 0.0)
        why = (
            f"{story.name} acts in the demo once its condition has held for {DEMO_FOR_S:g} s"
            + (f", then measures its effect over {DEMO_WINDOW_S:g} s" if tunes else "")
            + f", and the shift, the queue building up, the answer, the restart and the "
            f"governor's check take about {MARGIN_S:g} s more"
        )
        return wait + MARGIN_S, why
    chosen = min(acting, key=lambda spec: spec.for_s, default=None)
    if chosen is None:
        return MARGIN_S, "the pack has no policy that acts"
    why = (
        f"{chosen.name} acts only after its condition has held for {chosen.for_s:g} s, "
        f"and the shift, the queue building up, the answer and the restart take about "
        f"{MARGIN_S:g} s more"
    )
    return chosen.for_s + MARGIN_S, why


def write_workload(spec: WorkloadSpec, path: Path) -> list[Arrival]:
    """Write ``spec`` for ``sim serve --load``; return its arrivals (the same, seeded)."""
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False), "utf-8")
    return generate(load_workload(path))


def write_vllm_yaml(path: Path, port: int) -> None:
    """The starting vLLM config: a step budget too small for the workload's prefills.

    Requests are logged (``enable-log-requests``), as many deployments do for auditing:
    that is what fills the log directory in the disk act.
    """
    path.write_text(
        "# vLLM --config of the demo's simulated server; the governor edits it.\n"
        "served-model-name: meta-llama/Llama-3.1-8B-Instruct\n"
        f"port: {port}\n"
        f"shutdown-timeout: {SHUTDOWN_TIMEOUT_S}\n"
        "enable-log-requests: true\n"
        f"max-num-seqs: {STARTING_MAX_NUM_SEQS}\n"
        f"{TUNED_OPTION}: {STARTING_MAX_NUM_BATCHED_TOKENS}\n",
        encoding="utf-8",
    )


def write_env_file(path: Path) -> None:
    """The server's environment file: vLLM's default level, spelled out for the governor."""
    path.write_text(
        "# The demo's vLLM environment (systemd's EnvironmentFile=); the governor edits it.\n"
        f"VLLM_LOGGING_LEVEL={STARTING_LOG_LEVEL}\n",
        encoding="utf-8",
    )


def restart_command(paths: Paths) -> list[str]:
    """How the governor restarts the server: ask ``sim supervise``, as systemctl asks systemd."""
    return [
        sys.executable, "-m", "daemon.app.cli", "sim", "restart",
        "--socket", str(paths.supervisor_socket),
    ]  # fmt: skip


def local_approver() -> str:
    """The user running the demo, as the allow-lists name local CLI users."""
    return f"unix:{pwd.getpwuid(os.getuid()).pw_name}"


def governor_config(
    paths: Paths,
    *,
    policies: Path,
    sim_port: int,
    metrics_port: int,
    verify_window_s: float,
    log_budget_bytes: int,
) -> str:
    """config.toml: one actuated instance, its envelope, the approver, short windows."""
    approver = json.dumps(local_approver())
    restart = json.dumps(restart_command(paths))
    return f"""\
# The demo's governor: everything on loopback and in {paths.scratch}.
[governor]
state_dir = {json.dumps(str(paths.scratch / "state"))}
policy_dirs = [{json.dumps(str(policies))}]
evaluation_interval_s = 1.0
shutdown_deadline_s = 10.0
[control]
socket_path = {json.dumps(str(paths.control_socket))}
[metrics]
listen_host = "127.0.0.1"
listen_port = {metrics_port}
[logging]
format = "text"
# One person answers in the demo: they may approve restarts alone.
[approvals]
sweep_interval_s = 1.0
# What a proposal states as its cost: the drain (new requests refused) and the loading.
restart_downtime_s = {SHUTDOWN_TIMEOUT_S + LOADING_S:g}
[approvals.change]
users = [{approver}]
[approvals.restart]
users = [{approver}]
two_person = false
[sources.nvml]
enabled = false
# The server's log directory, read against its budget (the disk act); no file system's usage.
[sources.host]
interval_s = {HOST_INTERVAL_S:g}
disk_paths = []
[sources.host.dir_budgets]
{json.dumps(str(paths.log_dir))} = {log_budget_bytes}
[[vllm]]
name = "{INSTANCE}"
url = "http://127.0.0.1:{sim_port}"
scrape_interval_s = 1.0
config_path = {json.dumps(str(paths.vllm_yaml))}
env_file = {json.dumps(str(paths.env_file))}
restart_command = {restart}
restart_timeout_s = 60.0
ready_timeout_s = 60.0
verify_window_s = {verify_window_s:g}
# The admission gate in front of the server's load (sim serve --gate-socket answers HAProxy's
# runtime API); admission-cap steers its cap, and the governor drains it around a restart.
[vllm.gate]
enabled = true
stats_socket = {json.dumps(str(paths.gate_socket))}
backend = "{GATE_BACKEND}"
server = "{GATE_SERVER}"
queue_timeout_s = {GATE_QUEUE_TIMEOUT_S:g}
# No dwell: the demo's minutes are short. The pack may move both knobs within these bounds.
[vllm.knobs.max_num_seqs]
min = 32
max = 128
max_step = 32
min_dwell_s = 0
hourly_budget = 4
[vllm.knobs.max_num_batched_tokens]
min = 256
max = 1024
max_step = 256
min_dwell_s = 0
hourly_budget = 4
# log-disk's knobs: any level, request logging on or off.
[vllm.knobs.log_level]
min = 10
max = 40
max_step = 30
min_dwell_s = 0
hourly_budget = 4
[vllm.knobs.enable_log_requests]
min = 0
max = 1
max_step = 1
min_dwell_s = 0
hourly_budget = 4
"""
