"""The governor's approvals plane, running for real against the Slack double.

The plane, its store (SQLite in a temporary state directory), its Slack tasks with the real
slack-sdk clients, and the actuation plane's runner are all the daemon's own code; only the
actuator records changes instead of restarting a vLLM server (it still honours freeze files as
the real one does, and refuses a change whose assumed value is not the current one), and the
policy view is a settable stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from actuators.kinds import VLLM
from actuators.vllm.freezes import freeze_reason
from daemon.approvals.proposal import Proposal
from daemon.core.actuation import DONE, REFUSED, ActuationResult, ChangeRequest
from daemon.core.approval_settings import AllowListSection, ApprovalsSection, SlackSection
from daemon.core.clock import SystemClock
from daemon.core.secrets import GovernorSecrets
from daemon.core.settings import (
    GovernorConfig,
    GovernorSection,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
    VllmInstance,
)
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.approvals.approvals_plane import ApprovalsPlane, GroupDecision, no_group_change
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import supervise
from daemon.fleet.freeze_writes import FleetFreezer
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from tests.support.slack_double.messages import CHANNEL
from tests.support.slack_double.server import APP_TOKEN, BOT_TOKEN, SlackDouble

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ALICE, BOB, MALLORY = "U0ALICE", "U0BOB", "U0MALLORY"


@dataclass
class RecordingActuator:
    """Applies changes to an in-memory server; honours freeze files and refuses stale ones."""

    state_dir: Path
    knobs: dict[str, float] = field(default_factory=lambda: {"max_num_seqs": 8.0})
    applied: list[ChangeRequest] = field(default_factory=list)
    delay_s: float = 0.0

    def current_knobs(self, instance: VllmInstance) -> dict[str, float]:
        """The in-memory server's knobs."""
        return dict(self.knobs)

    async def refresh(self, instance: VllmInstance) -> None:
        """The knobs are in memory: nothing to read."""

    async def apply(
        self, instance: VllmInstance, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Apply after the checks the real actuator would make here."""
        frozen = freeze_reason(self.state_dir, instance.name, SystemClock().wall())
        stale = [k for k, v in request.current.items() if self.knobs.get(k) != v]
        if frozen or stale:
            why = frozen or f"stale: {', '.join(stale)}"
            return ActuationResult(request.target, request.policy, REFUSED, why)
        await asyncio.sleep(self.delay_s)
        self.applied.append(request)
        self.knobs.update(request.changes)
        return ActuationResult(
            request.target, request.policy, DONE, "applied and verified", dict(request.changes)
        )

    async def reconcile(self, instance: VllmInstance) -> ActuationResult | None:
        """Nothing is ever left open here."""
        return None


@dataclass
class StandInLens:
    """The policies' answer at click time, set by the test."""

    holds: bool | None = True
    vetoed_by: str | None = None

    def condition_holds(self, policy: str, target: str) -> bool | None:
        """As set."""
        return self.holds

    def veto(self, proposal: Proposal) -> str | None:
        """As set."""
        return self.vetoed_by


@dataclass
class Rig:
    """A running approvals plane and what the test steers."""

    plane: ApprovalsPlane
    actuation: ActuationPlane
    actuator: RecordingActuator
    lens: StandInLens
    config: GovernorConfig


def rig_config(
    state_dir: Path, slack_at: SlackDouble | str | None, **changes: Any
) -> GovernorConfig:
    """One server, ``main``; Slack at the double (or at a URL), or no Slack (None)."""
    url = slack_at.base_url if isinstance(slack_at, SlackDouble) else slack_at
    slack = SlackSection(
        enabled=url is not None,
        channel=CHANNEL,
        api_base_url=url or "https://slack.com/api/",
        transport=changes.pop("transport", "socket_mode"),
        http_listen_port=0,
        timeout_s=2.0,
        max_retries=changes.pop("max_retries", 3),
        retry_max_delay_s=2.0,
    )
    approvals = ApprovalsSection(
        expiry_s=changes.pop("expiry_s", 600.0),
        sweep_interval_s=0.1,
        change=AllowListSection(users=(ALICE,)),
        restart=AllowListSection(
            users=(ALICE, BOB, *changes.pop("cli_users", ())),
            groups=changes.pop("groups", ()),
            two_person=changes.pop("two_person", False),
        ),
    )
    server = VllmInstance(
        name="main",
        url="http://127.0.0.1:9",
        unit="vllm@main.service",
        config_path=state_dir / "main.yaml",
    )
    assert not changes, f"unknown rig settings: {changes}"
    return GovernorConfig(
        governor=GovernorSection(state_dir=state_dir, policy_dirs=()),
        slack=slack,
        approvals=approvals,
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
        vllm=(server,),
    )


def intent(old: float = 8, new: float = 16, policy: str = "more-seqs") -> Decision:
    """An accepted approval-risk intent on ``main``."""
    return Decision(
        policy=policy,
        target="main",
        at=0.0,
        kind=DecisionKind.INTENT,
        evidence=Evidence("waiting > 2.0", {"waiting": 5.0}, 30.0),
        intent=Intent({"max_num_seqs": new}, {"max_num_seqs": old}, None, "approval"),
    )


@contextlib.asynccontextmanager
async def approvals_rig(
    state_dir: Path,
    slack_at: SlackDouble | str | None,
    *,
    actuator: RecordingActuator | None = None,
    fleet_freezer: FleetFreezer | None = None,
    group_decision: GroupDecision = no_group_change,
    **changes: Any,
) -> AsyncIterator[Rig]:
    """Run the approvals plane and the actuation runner until the block ends.

    ``fleet_freezer`` makes the governor a member of a fleet for Slack's fleet freeze;
    ``group_decision`` takes a group change's decision to its rollout.
    """
    config = rig_config(state_dir, slack_at, **changes)
    clock = SystemClock()
    registry = CollectorRegistry()
    actuator = actuator or RecordingActuator(state_dir)
    signals = SignalPlane(config, clock, registry)
    path = state_dir / "state.sqlite3"
    actuation = ActuationPlane(
        lambda: config,
        signals,
        clock,
        registry,
        path,
        kinds=(replace(VLLM, factory=lambda _services: actuator),),
        on_applied=lambda _result: None,
        record=lambda _decisions: None,
    )
    secrets = GovernorSecrets(
        slack_bot_token=SecretStr(BOT_TOKEN),
        slack_app_token=SecretStr(APP_TOKEN),
        slack_signing_secret=SecretStr(SIGNING_SECRET),
    )
    lens = StandInLens()
    plane = ApprovalsPlane(
        lambda: config,
        clock,
        registry,
        path,
        actuation,
        lens=lens,
        secrets=secrets,
        host="gpu-1",
        fleet_freezer=fleet_freezer,
        group_decision=group_decision,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(supervise([*actuation.tasks(), *plane.tasks()], stop), name="rig")
    try:
        yield Rig(plane, actuation, actuator, lens, config)
    finally:
        stop.set()
        await task
        plane.close()
        actuation.close()
