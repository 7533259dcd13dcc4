"""Read vLLM's own ``--config`` YAML into :class:`~simulator.settings.EngineSettings`.

vLLM 0.33 (``FlexibleArgumentParser.load_config_file``) turns every top-level key into
``--key value`` (``true`` into a bare flag, ``false`` into ``--no-key`` or nothing, lists
into repeated values, mappings into JSON) and then rewrites underscores in option names to
dashes, so ``max_num_seqs`` and ``max-num-seqs`` are the same option. An option argparse
does not know fails the whole command with "unrecognized arguments"; so does it here.

The simulator honours the scheduling, KV and lifecycle options it models and accepts a
list of common options it does not model (recorded in ``EngineSettings.ignored``). A real
vLLM option outside both lists is refused with a message saying so: widen ``_IGNORED``
rather than model an option by accident.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from simulator.errors import SpecError, SpecIssue
from simulator.profiles import EngineProfile
from simulator.settings import EngineSettings, SchedulingPolicy, SettingsError
from simulator.spec_files import load_mapping, nearest_location

Kind = Literal["int", "optional_int", "float", "flag", "bool", "str"]


@dataclass(frozen=True, slots=True)
class _Option:
    field: str
    kind: Kind


# Option name (dashes) -> the EngineSettings field it sets and how argparse reads it.
_HONOURED: dict[str, _Option] = {
    "max-num-seqs": _Option("max_num_seqs", "int"),
    "max-num-batched-tokens": _Option("max_num_batched_tokens", "int"),
    "max-num-active-seqs": _Option("max_num_active_seqs", "optional_int"),
    "prefill-schedule-interval": _Option("prefill_schedule_interval", "int"),
    "long-prefill-token-threshold": _Option("long_prefill_token_threshold", "int"),
    "long-prefill-token-threshold-adaptive": _Option(
        "long_prefill_token_threshold_adaptive", "bool"
    ),
    "watermark": _Option("watermark", "float"),
    "enable-chunked-prefill": _Option("enable_chunked_prefill", "bool"),
    "enable-prefix-caching": _Option("enable_prefix_caching", "bool"),
    "scheduler-reserve-full-isl": _Option("scheduler_reserve_full_isl", "bool"),
    "shutdown-timeout": _Option("shutdown_timeout", "int"),
    "max-num-queued-reqs": _Option("max_num_queued_reqs", "optional_int"),
    "max-num-queued-tokens": _Option("max_num_queued_tokens", "optional_int"),
    "scheduling-policy": _Option("scheduling_policy", "str"),
    "block-size": _Option("block_size", "int"),
    "num-gpu-blocks-override": _Option("num_gpu_blocks", "int"),
    "disable-log-stats": _Option("disable_log_stats", "flag"),
    "enable-log-requests": _Option("enable_log_requests", "bool"),
    "served-model-name": _Option("served_model_name", "str"),
    "model": _Option("model", "str"),
    "performance-mode": _Option("performance_mode", "str"),
}

# Options of vLLM 0.33 that the simulator accepts and does not model.
_IGNORED = frozenset(
    {
        "allowed-origins",
        "api-key",
        "async-scheduling",
        "chat-template",
        "compilation-config",
        "disable-custom-all-reduce",
        "disable-uvicorn-access-log",
        "distributed-executor-backend",
        "download-dir",
        "dtype",
        "enable-auto-tool-choice",
        "enable-force-include-usage",
        "enable-prompt-tokens-details",
        "enable-server-load-tracking",
        "enable-sleep-mode",
        "enforce-eager",
        "generation-config",
        "gpu-memory-utilization",
        "host",
        "kv-cache-dtype",
        "load-format",
        "log-level",
        "logging-config",
        "max-log-len",
        "max-logprobs",
        "max-model-len",
        "optimization-level",
        "otlp-traces-endpoint",
        "override-generation-config",
        "pipeline-parallel-size",
        "port",
        "quantization",
        "reasoning-parser",
        "revision",
        "root-path",
        "seed",
        "show-hidden-metrics-for-version",
        "ssl-certfile",
        "ssl-keyfile",
        "stream-interval",
        "tensor-parallel-size",
        "data-parallel-size",
        "tokenizer",
        "tool-call-parser",
        "trust-remote-code",
        "uds",
        "uvicorn-log-level",
    }
)

# Options that vLLM 0.33 refuses although older releases or guides use them.
_REFUSED_BY_VLLM = {
    "max-num-partial-prefills": "removed from vLLM (PR #49244)",
    "max-long-partial-prefills": "removed from vLLM with max-num-partial-prefills (PR #49244)",
    "scheduler-delay-factor": "exists only in the V0 engine; vLLM V1 has no such option",
    "disable-log-requests": "removed (PR #29402); requests are not logged unless "
    "enable-log-requests is set",
    "swap-space": "removed with the V0 engine; V1 preempts by recomputation",
    "preemption-mode": "removed with the V0 engine; V1 preempts by recomputation",
}

_PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")


def load_vllm_config(path: Path, profile: EngineProfile) -> EngineSettings:
    """Read a vLLM ``--config`` YAML and resolve it against the profile's defaults.

    Raises:
        SpecError: unreadable YAML, unrecognized options, bad values, or settings vLLM would
            refuse; each problem located at its key.
    """
    document, locations = load_mapping(path)
    return settings_from_options(document, profile, path, locations)


def settings_from_options(
    options: dict[str, Any],
    profile: EngineProfile,
    path: Path = Path("<options>"),
    locations: dict[Any, tuple[int, int]] | None = None,
) -> EngineSettings:
    """Resolve vLLM options (either spelling) against ``profile``, as ``vllm serve`` would.

    Raises:
        SpecError: as :func:`load_vllm_config`.
    """
    locations = locations or {}
    issues: list[SpecIssue] = []
    values: dict[str, Any] = {}
    ignored: list[tuple[str, str]] = []
    spelled: dict[str, str] = {}

    def issue(key: str, message: str) -> None:
        line, column = nearest_location(locations, (key,))
        issues.append(SpecIssue(path, line, column, key, message))

    for key, value in options.items():
        name = str(key).replace("_", "-")
        if name in spelled:
            issue(str(key), f"given twice (also as {spelled[name]!r})")
            continue
        spelled[name] = str(key)
        if name in _HONOURED:
            option = _HONOURED[name]
            converted, problem = _convert(value, option.kind, name)
            if problem:
                issue(str(key), problem)
            else:
                values[option.field] = converted
        elif name in _IGNORED:
            ignored.append((name, str(value)))
        else:
            why = _REFUSED_BY_VLLM.get(name)
            hint = (
                f" ({why})"
                if why
                else " (the simulator accepts the options it models and common ones it "
                "ignores: see simulator/vllm_config.py)"
            )
            issue(str(key), f"unrecognized arguments: --{name}{hint}")
    if not issues:
        try:
            return _resolve(values, ignored, profile)
        except SettingsError as exc:
            for field_name, message in exc.problems:
                key = _spelling_of(field_name, spelled)
                issue(key, message)
    raise SpecError(sorted(issues, key=lambda found: (found.line, found.column)))


def _resolve(
    values: dict[str, Any], ignored: list[tuple[str, str]], profile: EngineProfile
) -> EngineSettings:
    mode = values.pop("performance_mode", "balanced")
    if mode not in _PERFORMANCE_MODES:
        raise SettingsError(
            [("performance_mode", f"must be one of {', '.join(_PERFORMANCE_MODES)}")]
        )
    policy = values.get("scheduling_policy")
    if policy is not None:
        if policy not in tuple(SchedulingPolicy):
            choices = ", ".join(repr(choice.value) for choice in SchedulingPolicy)
            message = f"invalid choice: {policy!r} (choose from {choices})"
            raise SettingsError([("scheduling_policy", message)])
        values["scheduling_policy"] = SchedulingPolicy(policy)
    model = values.pop("model", None)
    served = values.pop("served_model_name", None) or model or profile.model
    # `--performance-mode throughput` doubles the two batch defaults when they are not set
    # (EngineArgs.get_batch_defaults).
    factor = 2 if mode == "throughput" else 1
    values.setdefault("max_num_seqs", profile.default_max_num_seqs * factor)
    values.setdefault("max_num_batched_tokens", profile.default_max_num_batched_tokens * factor)
    # The KV memory is what the GPU has; another block size only cuts it differently.
    block_size = values.setdefault("block_size", profile.block_size)
    values.setdefault("num_gpu_blocks", profile.kv_blocks * profile.block_size // block_size)
    return EngineSettings(served_model_name=served, ignored=tuple(ignored), **values)


def _convert(value: Any, kind: Kind, name: str) -> tuple[Any, str]:
    """Read ``value`` as argparse would read ``--name str(value)``; return (value, problem)."""
    if kind in ("flag", "bool"):
        if isinstance(value, bool):
            return value, ""
        return None, f"expects true or false, got {value!r} (vLLM makes it a flag)"
    if kind == "str":
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, dict | list) or value is None:
            return None, f"expects a string, got {value!r}"
        return str(value), ""
    return _convert_number(value, kind, name)


def _convert_number(value: Any, kind: Kind, name: str) -> tuple[Any, str]:
    type_name = "float" if kind == "float" else "int"
    if value is None and kind == "optional_int":
        return None, ""
    if isinstance(value, bool | dict | list) or value is None:
        return None, f"invalid {type_name} value: {value!r}"
    try:
        return (float(str(value)) if kind == "float" else int(str(value))), ""
    except ValueError:
        return None, f"invalid {type_name} value: {str(value)!r} (--{name})"


def _spelling_of(field_name: str, spelled: dict[str, str]) -> str:
    for name, option in _HONOURED.items():
        if option.field == field_name and name in spelled:
            return spelled[name]
    return field_name.replace("_", "-")
