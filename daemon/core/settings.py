"""The governor's configuration schema (``config.toml``), validated by pydantic.

Every model forbids unknown keys, so a typo is an error rather than a silently ignored
setting. Secrets are not part of this schema: they come from the environment or from systemd
credentials (see :mod:`daemon.core.secrets`). ``config.example.toml`` documents every field;
a test keeps the two in step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from daemon.core.approval_settings import ApprovalsSection, SlackSection
from daemon.core.batch_settings import BatchSection
from daemon.core.fleet_settings import FleetSection
from daemon.core.gate_settings import GateSettings
from daemon.core.http_log_level_settings import LOG_LEVEL_KNOB, HttpLogLevelTarget
from daemon.core.knobs import KNOBS
from daemon.core.mqtt_topics import subscription_problems
from daemon.core.placeholders import refuse_other_placeholders
from daemon.core.recording_settings import RecordingSection
from daemon.core.secret_patterns import refuse_credentials


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=0, le=65535)]
# Instance names appear in labels, unit names and Slack messages: keep them plain.
InstanceName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
# The restart command is an argument list run without a shell; the unit's name is the only
# thing substituted into it, so that no configured string can become a command of its own.
UNIT_PLACEHOLDER = "{unit}"
DEFAULT_RESTART_COMMAND = ("systemctl", "restart", UNIT_PLACEHOLDER)
SINCE_PLACEHOLDER = "{since}"
DEFAULT_SERVER_LOG_COMMAND = (
    "journalctl",
    f"--unit={UNIT_PLACEHOLDER}",
    f"--since=@{SINCE_PLACEHOLDER}",
    "--output=cat",
    "--no-pager",
)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


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


class SignalsSection(_Section):
    """Bounds of the in-memory signal store."""

    points_per_series: Annotated[int, Field(ge=2, le=100_000)] = 512
    max_series: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    # No one source (a vLLM server, MQTT, Prometheus, ...) holds more, so none starves another.
    max_series_per_source: Annotated[int, Field(ge=1, le=1_000_000)] = 4_000
    # A series absent this long while its source keeps answering is forgotten.
    forget_after_s: Seconds = 300.0
    window_s: Seconds = 60.0


class NvmlSourceSection(_Section):
    """GPU state through NVIDIA's management library."""

    enabled: bool = True
    interval_s: Seconds = 5.0
    timeout_s: Seconds = 3.0
    stale_after_s: Seconds = 30.0
    library_path: str = ""


class HostSourceSection(_Section):
    """Disk usage and load of this host."""

    enabled: bool = True
    interval_s: Seconds = 10.0
    timeout_s: Seconds = 3.0
    stale_after_s: Seconds = 60.0
    disk_paths: tuple[Path, ...] = (Path("/"),)
    # Directories read as volumes of a byte budget (host_source.py): a log directory's own
    # share of a file system it shares with other things.
    dir_budgets: dict[Path, Annotated[int, Field(gt=0)]] = {}

    @model_validator(mode="after")
    def _one_reading_per_path(self) -> HostSourceSection:
        both = sorted(str(path) for path in set(self.disk_paths) & set(self.dir_budgets))
        if both:
            message = (
                f"{', '.join(both)} is in both disk_paths and dir_budgets: its signals would "
                "mean two things; keep one"
            )
            raise ValueError(message)
        return self


class PrometheusQuery(_Section):
    """One PromQL query and how policies read its result."""

    query: str
    # The label whose value keys the signal's map (``sum by (model) (...)``: "model"); empty
    # for a scalar. The label is kept on the series whatever keep_labels says.
    key: str = ""
    unit: str = ""
    help: str = ""


class PrometheusSourceSection(_Section):
    """Signals computed by PromQL on a Prometheus server (optional: the governor needs none)."""

    enabled: bool = False
    url: str = "http://127.0.0.1:9090"
    interval_s: Seconds = 15.0
    timeout_s: Seconds = 5.0
    stale_after_s: Seconds = 60.0
    keep_labels: tuple[str, ...] = ()
    ca_file: str = ""
    queries: dict[str, str | PrometheusQuery] = {}

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        return refuse_credentials(value)

    def query_specs(self) -> dict[str, PrometheusQuery]:
        """Every query as a table, a plain string being a scalar's query."""
        return {
            name: PrometheusQuery(query=query) if isinstance(query, str) else query
            for name, query in self.queries.items()
        }

    @model_validator(mode="after")
    def _usable_when_enabled(self) -> PrometheusSourceSection:
        if self.enabled and not self.queries:
            message = "an enabled Prometheus source needs at least one entry in queries"
            raise ValueError(message)
        if not self.url.startswith(("http://", "https://")):
            message = "url must be an http:// or https:// URL"
            raise ValueError(message)
        return self


class MqttSubscriptionSection(_Section):
    """One topic filter mapped to one signal."""

    topic: str
    signal: str
    qos: Annotated[int, Field(ge=0, le=2)] = 0
    field: str = ""
    labels: dict[str, int] = {}
    # The label whose value keys the signal's map; empty for a scalar.
    key: str = ""
    unit: str = ""
    help: str = ""

    @model_validator(mode="after")
    def _sound(self) -> MqttSubscriptionSection:
        problems = subscription_problems(self.topic, self.signal, self.qos, self.field, self.labels)
        if self.key and self.key not in self.labels:
            known = ", ".join(sorted(self.labels)) or "none"
            problems.append(f"key {self.key!r} is not one of the labels (labels: {known})")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class MqttSourceSection(_Section):
    """Telemetry over MQTT, and the governor's own events published back."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: Port = 1883
    client_id: str = ""
    username: str = ""
    keepalive_s: Annotated[int, Field(ge=5, le=3600)] = 60
    timeout_s: Seconds = 10.0
    stale_after_s: Seconds = 300.0
    incoming_limit: Annotated[int, Field(ge=1)] = 10_000
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    publish_prefix: str = ""
    publish_queue_size: Annotated[int, Field(ge=1)] = 1000
    subscriptions: tuple[MqttSubscriptionSection, ...] = ()


class SourcesSection(_Section):
    """Sources other than the vLLM servers themselves: each a section with ``enabled``."""

    nvml: NvmlSourceSection = NvmlSourceSection()
    host: HostSourceSection = HostSourceSection()
    prometheus: PrometheusSourceSection = PrometheusSourceSection()
    mqtt: MqttSourceSection = MqttSourceSection()

    def all_disabled(self) -> SourcesSection:
        """These settings with every source off (``simulate`` and ``backtest`` poll nothing).

        Read from the fields, so that a source added here is off there too: a simulation
        must never read the real host, its GPUs or a real broker.
        """
        return self.model_copy(
            update={
                name: getattr(self, name).model_copy(update={"enabled": False})
                for name in type(self).model_fields
            }
        )


class Envelope(_Section):
    """The bounds inside which the governor may move one knob of one server."""

    min: float
    max: float
    max_step: Annotated[float, Field(gt=0)]
    min_dwell_s: Annotated[float, Field(ge=0)] = 900.0
    hourly_budget: Annotated[int, Field(ge=0, le=60)] = 2

    @model_validator(mode="after")
    def _ordered(self) -> Envelope:
        if self.min > self.max:
            message = f"min ({self.min:g}) is above max ({self.max:g})"
            raise ValueError(message)
        return self


class VllmInstance(_Section):
    """One vLLM server on this host, as the governor observes and retunes it (``[[vllm]]``).

    Only ``name`` and ``url`` are required. Without ``config_path`` the server is observed
    only: its knobs are unknown and no change is ever planned for it.
    """

    name: InstanceName
    url: str
    scrape_interval_s: Seconds = 2.0
    scrape_timeout_s: Seconds = 1.5
    stale_after_s: Seconds = 10.0
    # Bounds on one /metrics page (daemon.sources.metric_pages): beyond one, it is refused whole.
    max_page_bytes: Annotated[int, Field(ge=64 << 10, le=32 << 20)] = 4 << 20
    max_page_samples: Annotated[int, Field(ge=100, le=1_000_000)] = 10_000
    max_label_values: Annotated[int, Field(ge=10, le=1_000_000)] = 1_000
    knobs: dict[str, Envelope] = {}
    unit: str = ""
    config_path: Path | None = None
    env_file: Path | None = None
    restart_command: tuple[str, ...] = DEFAULT_RESTART_COMMAND
    # vLLM's own interpreter (its virtual environment's python): preflight asks vLLM's parser.
    python: Path | None = None
    # Where the server's output can be read, to read back the settings it says it started with.
    server_log_file: Path | None = None
    server_log_command: tuple[str, ...] = DEFAULT_SERVER_LOG_COMMAND
    restart_timeout_s: Seconds = 300.0
    ready_timeout_s: Seconds = 900.0
    # The envelope of a restart without a config change (a policy's ``operation: restart``):
    # at most this many restarts of the server, for any reason, in the last hour...
    restart_hourly_budget: Annotated[int, Field(ge=0, le=60)] = 2
    # ...and none sooner than this after the last one.
    restart_min_interval_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 900.0
    drain: Literal["shutdown-timeout", "pause"] = "shutdown-timeout"
    verify_window_s: Seconds = 300.0
    verify_max_error_rate_increase: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.05
    verify_max_ttft_p95_ratio: Annotated[float, Field(ge=1, allow_inf_nan=False)] = 1.5
    verify_max_preemption_rate_increase: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.5
    mode: Literal["active", "dry-run"] = "active"
    # The admission gate (HAProxy) in front of this server, if any: see gate_settings.py.
    gate: GateSettings = GateSettings()

    @field_validator("restart_command")
    @classmethod
    def _plain_arguments(cls, command: tuple[str, ...]) -> tuple[str, ...]:
        if not command or not command[0]:
            message = 'must name a program: an argument list such as ["systemctl", ...]'
            raise ValueError(message)
        for argument in command:
            refuse_other_placeholders(argument, UNIT_PLACEHOLDER, _PLACEHOLDER)
        return command

    @field_validator("server_log_command")
    @classmethod
    def _log_command_arguments(cls, command: tuple[str, ...]) -> tuple[str, ...]:
        if not command or not command[0]:
            message = 'must name a program: an argument list such as ["journalctl", ...]'
            raise ValueError(message)
        for argument in command:
            for placeholder in _PLACEHOLDER.findall(argument):
                if placeholder not in (UNIT_PLACEHOLDER, SINCE_PLACEHOLDER):
                    message = f"{placeholder} is not substituted; only {{unit}} and {{since}} are"
                    raise ValueError(message)
        return command

    def server_log_argv(self, since: float) -> tuple[str, ...]:
        """The log command with ``{unit}`` and ``{since}`` (whole Unix seconds) substituted."""
        return tuple(
            argument.replace(UNIT_PLACEHOLDER, self.unit).replace(
                SINCE_PLACEHOLDER, str(int(since))
            )
            for argument in self.server_log_command
        )

    @model_validator(mode="after")
    def _actuatable(self) -> VllmInstance:
        uses_unit = any(UNIT_PLACEHOLDER in argument for argument in self.restart_command)
        if self.config_path is not None and uses_unit and not self.unit:
            message = (
                f"restart_command uses {UNIT_PLACEHOLDER} but unit is not set "
                "(name the systemd unit, e.g. vllm@main.service)"
            )
            raise ValueError(message)
        return self

    def restart_argv(self) -> tuple[str, ...]:
        """The restart command with ``{unit}`` replaced, and nothing else touched."""
        return tuple(
            argument.replace(UNIT_PLACEHOLDER, self.unit) for argument in self.restart_command
        )

    @field_validator("knobs")
    @classmethod
    def _known_knobs(cls, knobs: dict[str, Envelope]) -> dict[str, Envelope]:
        unknown = sorted(set(knobs) - set(KNOBS))
        if unknown:
            message = f"unknown knob(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOBS))})"
            raise ValueError(message)
        return knobs

    @field_validator("url")
    @classmethod
    def _http_only(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            message = "must be an http:// or https:// URL"
            raise ValueError(message)
        return refuse_credentials(value).rstrip("/")


class GovernorConfig(_Section):
    """The whole of ``config.toml``."""

    governor: GovernorSection = GovernorSection()
    control: ControlSection = ControlSection()
    metrics: MetricsSection = MetricsSection()
    logging: LoggingSection = LoggingSection()
    slack: SlackSection = SlackSection()
    approvals: ApprovalsSection = ApprovalsSection()
    signals: SignalsSection = SignalsSection()
    recording: RecordingSection = RecordingSection()
    batch: BatchSection = BatchSection()
    fleet: FleetSection = FleetSection()
    sources: SourcesSection = SourcesSection()
    vllm: tuple[VllmInstance, ...] = ()
    http_log_level: tuple[HttpLogLevelTarget, ...] = ()

    @model_validator(mode="after")
    def _targets_unique(self) -> GovernorConfig:
        names = [instance.name for instance in self.vllm]
        repeated = sorted({t.name for t in self.http_log_level if t.name in names})
        others = [target.name for target in self.http_log_level]
        repeated += sorted({name for name in others if others.count(name) > 1})
        if repeated:
            message = (
                "target names must be unique across [[vllm]] and [[http_log_level]]; "
                f"repeated: {', '.join(repeated)}"
            )
            raise ValueError(message)
        return self

    @model_validator(mode="after")
    def _fleet_groups_of_instances(self) -> GovernorConfig:
        unknown = sorted(set(self.fleet.groups) - {instance.name for instance in self.vllm})
        if unknown:
            message = (
                f"fleet.groups names {', '.join(unknown)}, not a [[vllm]] instance of this config"
            )
            raise ValueError(message)
        return self

    @field_validator("vllm")
    @classmethod
    def _unique_names(cls, instances: tuple[VllmInstance, ...]) -> tuple[VllmInstance, ...]:
        names = [instance.name for instance in instances]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            message = f"vLLM instance names must be unique; repeated: {', '.join(duplicates)}"
            raise ValueError(message)
        return instances

    def target_names(self) -> list[str]:
        """Every target policies may name, in file order: vLLM instances, then live services."""
        return [instance.name for instance in self.vllm] + self.live_target_names()

    def live_target_names(self) -> list[str]:
        """The targets changed live, without a restart: services of ``[[http_log_level]]``."""
        return [target.name for target in self.http_log_level]

    def envelopes(self) -> dict[tuple[str, str], Envelope]:
        """Every knob envelope, keyed by (instance name, knob)."""
        return {
            (instance.name, knob): envelope
            for instance in self.vllm
            for knob, envelope in instance.knobs.items()
        } | {
            (target.name, LOG_LEVEL_KNOB): Envelope(**target.knob.model_dump())
            for target in self.http_log_level
        }
