"""What ``sim serve`` runs: its options, resolved against the vLLM config and the profile.

Like ``vllm serve``, the listening address may come from the config YAML (``host:``,
``port:``); the command line wins over the file. vLLM listens on port 8000 of every
interface by default; the simulator listens on 127.0.0.1 unless told otherwise, since it is
a test instrument, not a service.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.arrivals import Arrival
from simulator.errors import SpecError, SpecIssue
from simulator.profiles import EngineProfile, load_profile
from simulator.server.load_replay import load_arrivals
from simulator.server.request_log import logs_requests
from simulator.settings import EngineSettings
from simulator.shipped import DEFAULT_HOST, DEFAULT_PORT
from simulator.spec_files import load_mapping
from simulator.vllm_config import load_vllm_config


@dataclass(frozen=True, slots=True)
class GateOptions:
    """``--gate-socket``: the replayed load passes a gate (:mod:`simulator.server.gated_load`).

    Attributes:
        socket: The Unix socket that answers HAProxy's runtime API over the gate.
        backend: The backend's name there (``[vllm.gate] backend``).
        server: The server's name there (``[vllm.gate] server``).
        queue_timeout_s: HAProxy's ``timeout queue``: the longest wait before a 503.
        state: A file that keeps the gate's cap across this server's restarts, as HAProxy's
            live ``maxconn`` outlives vLLM's; None: each process opens at ``max-num-seqs``.
    """

    socket: Path
    backend: str = "vllm"
    server: str = "main"
    queue_timeout_s: float = 1.5
    state: Path | None = None


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The command line of ``sim serve``.

    Attributes:
        config: vLLM ``--config`` YAML.
        profile: Engine profile, a shipped name or a file.
        host: Address to listen on (default: the YAML's ``host``, else 127.0.0.1).
        port: Port to listen on (default: the YAML's ``port``, else 8000).
        load: Trace CSV or workload YAML to replay against the server, or None.
        load_seed: Seed of a workload (default: the spec's own).
        load_origin: Unix time of the workload's time 0 (default: when the server is ready).
        loading_s: How long the port stays closed at start (default: the profile's restart
            time at these settings).
        summary: Where to append this process's summary line on exit, or None.
        log_level: The logging level (vLLM's ``VLLM_LOGGING_LEVEL``, read from the
            environment at start).
        gate: The gate in front of the replayed load, or None.
    """

    config: Path
    profile: str
    host: str | None = None
    port: int | None = None
    load: str | None = None
    load_seed: int | None = None
    load_origin: float | None = None
    loading_s: float | None = None
    summary: Path | None = None
    log_level: int = logging.INFO
    gate: GateOptions | None = None


@dataclass(frozen=True, slots=True)
class ServePlan:
    """Everything the server needs, validated.

    Attributes:
        profile: The model and GPU.
        settings: The engine settings from the config YAML.
        host: Address to listen on.
        port: Port to listen on.
        loading_s: Seconds the port stays closed at start.
        arrivals: The workload to replay (empty without ``--load``).
        load_name: The workload's name for the log, or None.
        load_origin: As in :class:`ServeOptions`.
        summary: As in :class:`ServeOptions`.
        given: The options given (file and flags), as vLLM logs them at start.
        log_level: As in :class:`ServeOptions`.
        gate: As in :class:`ServeOptions`.
    """

    profile: EngineProfile
    settings: EngineSettings
    host: str
    port: int
    loading_s: float
    arrivals: list[Arrival]
    load_name: str | None
    load_origin: float | None
    summary: Path | None = None
    given: dict[str, Any] = field(default_factory=dict)
    log_level: int = logging.INFO
    gate: GateOptions | None = None

    @property
    def log_requests(self) -> bool:
        """Whether it writes vLLM's line per request (``--enable-log-requests`` at INFO)."""
        return logs_requests(self.log_level, self.settings.enable_log_requests)


def resolve(options: ServeOptions) -> ServePlan:
    """Read the profile, the config YAML and the workload.

    Raises:
        SpecError: One of the files is invalid, or the YAML's port is not a port.
    """
    profile = load_profile(options.profile)
    settings = load_vllm_config(options.config, profile)
    from_file = dict(settings.ignored)
    port = options.port
    if port is None:
        port = _port(from_file.get("port", str(DEFAULT_PORT)), options.config)
    file_host = from_file.get("host")
    host = options.host or (file_host if file_host not in (None, "", "None") else DEFAULT_HOST)
    loading_s = options.loading_s
    if loading_s is None:
        loading_s = profile.restart_downtime_s(
            settings.max_num_seqs, settings.max_num_batched_tokens
        )
    arrivals: list[Arrival] = []
    load_name = None
    if options.load is not None:
        arrivals, load_name = load_arrivals(options.load, options.load_seed)
    if options.gate is not None:
        _check_gate(options.gate, options.load, options.config)
    return ServePlan(
        profile=profile,
        settings=settings,
        host=host,
        port=port,
        loading_s=max(0.0, loading_s),
        arrivals=arrivals,
        load_name=load_name,
        load_origin=options.load_origin,
        summary=options.summary,
        given=_given(options.config, host, port),
        log_level=options.log_level,
        gate=options.gate,
    )


def _given(config: Path, host: str, port: int) -> dict[str, Any]:
    """The options as vLLM's start-up line states them: underscores, file merged with flags."""
    document, _ = load_mapping(config)
    given = {str(key).replace("-", "_"): value for key, value in document.items()}
    return {**given, "host": host, "port": port}


def _port(text: str, config: Path) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        message = f"invalid port {text!r}: expected an integer from 0 to 65535"
        raise SpecError([SpecIssue(config, 0, 0, "port", message)])
    return port


def _check_gate(gate: GateOptions, load: str | None, config: Path) -> None:
    """The gate fronts the replayed load: it needs one, and a positive queue timeout."""
    problem = None
    if load is None:
        problem = "--gate-socket puts a gate in front of the --load replay: give --load"
    elif not gate.queue_timeout_s > 0:
        problem = f"the gate's queue timeout must be positive, not {gate.queue_timeout_s}"
    if problem is not None:
        raise SpecError([SpecIssue(config, 0, 0, "gate", problem)])
