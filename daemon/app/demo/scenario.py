"""What the demo runs: the workload, the starting vLLM YAML, the governor's configuration.

The story, in the shipped workload's seven minutes (``simulator/workloads/demo-*.yaml``):
bursty conversation traffic at 13 requests/s against a vLLM whose step budget
(``max-num-batched-tokens: 256``) prefills too few prompt tokens per step for it. Requests
queue, TTFT P95 stays above the 2 s SLO with nothing preempted and TPOT far inside its SLO,
and the default pack's ``ttft-queue`` proposes a quarter more (256 -> 320); once approved,
the governor writes the YAML, restarts the server through the demo's stand-in for systemd
(``sim supervise``; the server drains what it holds for up to ``shutdown-timeout``), waits
for it, and verifies the change. A shorter or longer ``--duration`` scales the workload's
times; the policies' own durations (``for: 3m``) do not scale, so a duration too short for
the story's policy to act is refused (:func:`minimum_duration_s`: five minutes with the
default pack).
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from daemon.policy.loading import load_policies
from daemon.shipped import default_pack
from simulator.arrivals import Arrival
from simulator.shipped import WORKLOAD_DIR
from simulator.synthetic_workloads import WorkloadSpec, generate, load_workload

DEFAULT_PACK = default_pack()
WORKLOAD = WORKLOAD_DIR / "demo-prefill-budget.yaml"
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
# tokens are prefilled per step for the workload's 13 requests/s.
STARTING_MAX_NUM_BATCHED_TOKENS = 256
# The workload's time 0 is this long after the demo starts: both children are up by then.
START_MARGIN_S = 10.0
# The project's default SLO per request (what kv-thrash and the summary judge by): TTFT <= 2 s,
# TPOT <= 100 ms, a common interactive-chat target; an operator sets their own.
TTFT_SLO_S = 2.0
TPOT_SLO_S = 0.100
# The policy whose story the demo tells.
STORY_POLICY = "ttft-queue"
# Besides the policy's own `for`: about 40 s for the queue to build and TTFT P95 over its
# 60 s window to pass the SLO, then the answer, the restart (13 s) and a minute of serving
# with the new settings, so that the after of the before/after is more than a glimpse.
MARGIN_S = 120.0


@dataclass(frozen=True, slots=True)
class Paths:
    """Every file and socket of one demo run, inside its temporary directory."""

    scratch: Path

    @property
    def vllm_yaml(self) -> Path:
        """The served model's ``--config`` YAML, which the governor edits."""
        return self.scratch / "vllm.yaml"

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
    def sim_summary(self) -> Path:
        """One JSON line per ``sim serve`` process, written as each exits."""
        return self.scratch / "sim-summary.jsonl"

    @property
    def sim_log(self) -> Path:
        """The output of ``sim supervise`` and its server."""
        return self.scratch / "sim.log"

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
        update={"duration_s": duration_s, "bursts": bursts, "long_outputs": long_outputs}
    )


def minimum_duration_s(policies: Path) -> tuple[float, str]:
    """The shortest ``--duration`` in which the pack can act, and why, in words.

    The story's policy (``ttft-queue``) sets it when the pack has it; else the acting policy
    that waits least. A pack that cannot act at all asks only for the margin.
    """
    specs = load_policies([policies]).specs
    acting = [spec for spec in specs if spec.action is not None and not spec.shadow]
    story = next((spec for spec in acting if spec.name == STORY_POLICY), None)
    chosen = story or min(acting, key=lambda spec: spec.for_s, default=None)
    if chosen is None:
        return MARGIN_S, "the pack has no policy that acts"
    why = (
        f"{chosen.name} acts only after its condition has held for {chosen.for_s:g} s, "
        f"and the queue building up, the answer, the restart and a minute of serving after it "
        f"take about {MARGIN_S:g} s more"
    )
    return chosen.for_s + MARGIN_S, why


def write_workload(spec: WorkloadSpec, path: Path) -> list[Arrival]:
    """Write ``spec`` for ``sim serve --load``; return its arrivals (the same, seeded)."""
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False), "utf-8")
    return generate(load_workload(path))


def write_vllm_yaml(path: Path, port: int) -> None:
    """The starting vLLM config: a step budget too small for the workload's prefills."""
    path.write_text(
        "# vLLM --config of the demo's simulated server; the governor edits max-num-seqs.\n"
        "served-model-name: meta-llama/Llama-3.1-8B-Instruct\n"
        f"port: {port}\n"
        f"shutdown-timeout: {SHUTDOWN_TIMEOUT_S}\n"
        f"max-num-seqs: {STARTING_MAX_NUM_SEQS}\n"
        f"{TUNED_OPTION}: {STARTING_MAX_NUM_BATCHED_TOKENS}\n",
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
[sources.host]
enabled = false
[[vllm]]
name = "{INSTANCE}"
url = "http://127.0.0.1:{sim_port}"
scrape_interval_s = 1.0
config_path = {json.dumps(str(paths.vllm_yaml))}
restart_command = {restart}
restart_timeout_s = 60.0
ready_timeout_s = 60.0
verify_window_s = {verify_window_s:g}
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
"""
