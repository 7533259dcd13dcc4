"""The governor's configuration schema (``config.toml``), validated by pydantic.

Every model forbids unknown keys, so a typo is an error rather than a silently ignored
setting. Secrets are not part of this schema: they come from the environment or from systemd
credentials (see :mod:`daemon.core.secrets`). ``config.example.toml`` documents every field;
a test keeps the two in step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=0, le=65535)]


class GovernorSection(_Section):
    """Where the governor keeps its state and how often it thinks."""

    state_dir: Path = Path("/var/lib/vllm-governor")
    policy_dirs: tuple[Path, ...] = (Path("/etc/vllm-governor/policies"),)
    evaluation_interval_s: Seconds = 5.0
    shutdown_deadline_s: Seconds = 20.0


class ControlSection(_Section):
    """The local Unix socket through which the CLI talks to the running daemon."""

    socket_path: Path = Path("/run/vllm-governor/control.sock")


class MetricsSection(_Section):
    """The governor's own Prometheus endpoint."""

    enabled: bool = True
    listen_host: str = "127.0.0.1"
    listen_port: Port = 9877


class LoggingSection(_Section):
    """Log level and format of the governor's own logs (stdout, read by journald)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = "json"


class SlackSection(_Section):
    """Where approval requests go. The tokens come from the environment, never this file."""

    enabled: bool = False
    channel: str = ""


class GovernorConfig(_Section):
    """The whole of ``config.toml``."""

    governor: GovernorSection = GovernorSection()
    control: ControlSection = ControlSection()
    metrics: MetricsSection = MetricsSection()
    logging: LoggingSection = LoggingSection()
    slack: SlackSection = SlackSection()
