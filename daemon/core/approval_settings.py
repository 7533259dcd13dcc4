"""The ``[slack]`` and ``[approvals]`` sections of ``config.toml``.

``[slack]`` says where proposals are posted and how the governor talks to Slack; the tokens
(bot token, app-level token, signing secret) are secrets and never appear here (see
:mod:`daemon.core.secrets`). ``[approvals]`` says who may decide which kind of change, and for
how long a proposal waits. Without an allow-list nobody may approve anything: a missing
setting fails closed. Without Slack, proposals are decided with the CLI only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from daemon.core.secret_patterns import refuse_credentials

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=0, le=65535)]
# Slack user ids (U0123, W0123), or unix:LOGIN for people approving with the local CLI.
Approver = Annotated[
    str, StringConstraints(pattern=r"^([UW][A-Z0-9]{2,}|unix:[a-z_][a-z0-9_.-]*)$")
]
# Slack user-group ids (S0123), or unix-group:NAME for the local groups of CLI users.
ApproverGroup = Annotated[
    str, StringConstraints(pattern=r"^(S[A-Z0-9]{2,}|unix-group:[a-z_][a-z0-9_.-]*)$")
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlackSection(_Section):
    """Where approval requests go, and how the governor talks to Slack."""

    enabled: bool = False
    channel: str = ""
    api_base_url: str = "https://slack.com/api/"
    transport: Literal["socket_mode", "http"] = "socket_mode"
    http_listen_host: str = "127.0.0.1"
    http_listen_port: Port = 3000
    http_path: str = "/slack/interactivity"
    timeout_s: Seconds = 10.0
    max_retries: Annotated[int, Field(ge=0, le=20)] = 5
    retry_max_delay_s: Seconds = 60.0
    group_cache_s: Seconds = 60.0

    @field_validator("channel")
    @classmethod
    def _channel_id(cls, value: str) -> str:
        if value and (value[0] not in "CG" or not value.isalnum()):
            message = "must be a channel ID such as C0123ABCD (not a #name)"
            raise ValueError(message)
        return value

    @field_validator("api_base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            message = "must be an http:// or https:// URL"
            raise ValueError(message)
        refuse_credentials(value)
        return value if value.endswith("/") else value + "/"

    @field_validator("http_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            message = "must start with /"
            raise ValueError(message)
        return value


class AllowListSection(_Section):
    """Who may decide the proposals of one risk class."""

    users: tuple[Approver, ...] = ()
    groups: tuple[ApproverGroup, ...] = ()
    two_person: bool = False


class ApprovalsSection(_Section):
    """Who may approve what, and how long proposals wait."""

    expiry_s: Seconds = 1800.0
    sweep_interval_s: Seconds = 5.0
    restart_downtime_s: Seconds = 60.0
    change: AllowListSection = AllowListSection()
    restart: AllowListSection = AllowListSection(two_person=True)
