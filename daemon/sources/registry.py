"""The signal registry of a configuration: the built-in sources' signals and the configured ones.

Built-in sources (vLLM, its HAProxy gate, NVML, the host) declare their signals whether or not
they are enabled, as they always have: a signal of a source that is off simply has no data.
Prometheus queries and MQTT subscriptions declare theirs from the configuration, enabled or
not, for the same reason. Without a configuration (``vllm-governor check`` alone, policy
tests) the registry is the built-in one.
"""

from __future__ import annotations

from pathlib import Path

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.settings import GovernorConfig
from daemon.sources import (
    gate_source,
    host_source,
    mqtt_signals,
    nvml_signals,
    own_signals,
    prometheus_signals,
    vllm_source,
)
from daemon.sources.declarations import SignalConflict, SignalRegistry

_BUILT_IN = (
    ("vllm", vllm_source.DECLARATIONS),
    ("vllm.gate", gate_source.DECLARATIONS),
    ("sources.nvml", nvml_signals.DECLARATIONS),
    ("sources.host", host_source.DECLARATIONS),
    ("batch", own_signals.DECLARATIONS),
)
BUILTIN = SignalRegistry.of(_BUILT_IN)


def signal_registry(config: GovernorConfig, path: Path | None = None) -> SignalRegistry:
    """Every signal ``config`` declares; ``path`` names the file in messages.

    Raises:
        ConfigError: a configured signal takes a name already declared by another source.
    """
    prometheus = config.sources.prometheus
    groups = [
        *_BUILT_IN,
        *(
            (f"sources.prometheus.queries.{declaration.name}", (declaration,))
            for declaration in prometheus_signals.declarations(prometheus)
        ),
        *(
            (f"sources.mqtt.subscriptions.{index}.signal", (declaration,))
            for index, declaration in enumerate(mqtt_signals.declarations(config.sources.mqtt))
        ),
    ]
    try:
        return SignalRegistry.of(groups)
    except SignalConflict as exc:
        issue = ConfigIssue(path or Path("config.toml"), 0, 0, exc.key_path, str(exc))
        raise ConfigError([issue]) from None
