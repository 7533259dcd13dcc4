"""Where a governed simulation keeps its files, and the configuration that points there.

The user's configuration (``--config``, or the built-in one) says how the instance is governed:
its envelopes, restart envelope, verification, approvals, evaluation interval, policies. What
would touch the machine is pointed into a scratch directory instead: the state and the control
socket, the server's config file and log, the gate's runtime socket; every source other than
the instance itself is off (no NVML, host, Prometheus or MQTT in a simulation), as are Slack,
the metrics endpoint and the policy-file watcher's reloads (the policies are read once). The
batch inbox is a directory of the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from daemon.core.approval_settings import AllowListSection
from daemon.core.gate_settings import GateSettings
from daemon.core.settings import GovernorConfig

# The simulated approvers: two, so that a two-person rule can be met.
APPROVERS = ("unix:sim-approver-1", "unix:sim-approver-2")
UNIT = "vllm-simulated.service"


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The paths of one governed run under ``root``."""

    root: Path
    backend: str = "vllm"
    server: str = "main"

    @property
    def state_dir(self) -> Path:
        """The governor's state directory."""
        return self.root / "state"

    @property
    def config_path(self) -> Path:
        """Where the configuration would be (never read: reloads are not simulated)."""
        return self.root / "config.toml"

    @property
    def control_socket(self) -> Path:
        """The control socket."""
        return self.root / "control.sock"

    @property
    def vllm_yaml(self) -> Path:
        """The server's ``--config`` file."""
        return self.root / "vllm.yaml"

    @property
    def server_log(self) -> Path:
        """The server's output."""
        return self.root / "vllm.log"

    @property
    def batch_inbox(self) -> Path:
        """Where batch job files are dropped (``[batch] inbox_dir``)."""
        return self.root / "batch-inbox"

    @property
    def haproxy_socket(self) -> Path:
        """The gate's runtime socket."""
        return self.root / "haproxy.sock"


def sandboxed(
    config: GovernorConfig,
    sandbox: Sandbox,
    port: int,
    restart_command: tuple[str, ...],
    *,
    gated: bool,
) -> GovernorConfig:
    """``config`` with its first instance pointed at the simulated host in ``sandbox``."""
    sandbox.state_dir.mkdir(parents=True, exist_ok=True)
    sandbox.batch_inbox.mkdir(exist_ok=True)
    instance = config.vllm[0]
    gate = GateSettings(
        enabled=gated,
        stats_socket=str(sandbox.haproxy_socket),
        backend=sandbox.backend,
        server=sandbox.server,
        interval_s=instance.gate.interval_s,
        stale_after_s=instance.gate.stale_after_s,
        drain_timeout_s=instance.gate.drain_timeout_s,
    )
    simulated = instance.model_copy(
        update={
            "url": f"http://127.0.0.1:{port}",
            "unit": UNIT,
            "config_path": sandbox.vllm_yaml,
            "env_file": None,
            "restart_command": restart_command,
            "python": None,
            "server_log_file": sandbox.server_log,
            "gate": gate,
        }
    )
    everyone = AllowListSection(users=APPROVERS)
    approvals = config.approvals.model_copy(
        update={
            "change": everyone,
            "restart": everyone.model_copy(update={"two_person": True}),
        }
    )
    sources = config.sources.all_disabled()
    return config.model_copy(
        update={
            "governor": config.governor.model_copy(update={"state_dir": sandbox.state_dir}),
            "control": config.control.model_copy(update={"socket_path": sandbox.control_socket}),
            "metrics": config.metrics.model_copy(update={"enabled": False}),
            "slack": config.slack.model_copy(update={"enabled": False}),
            "approvals": approvals,
            "batch": config.batch.model_copy(update={"inbox_dir": sandbox.batch_inbox}),
            "sources": sources,
            "vllm": (simulated,),
            "http_log_level": (),
        }
    )
