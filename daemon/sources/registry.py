"""The signal registry of a configuration: the built-in sources' signals and the configured ones.

The polling sources are those of the table of source kinds (:mod:`daemon.sources.kinds`).
Built-in sources (vLLM, its HAProxy gate, NVML, the host) declare their signals whether or not
they are enabled, as they always have: a signal of a source that is off simply has no data.
Prometheus queries and MQTT subscriptions declare theirs from the configuration, enabled or
not, for the same reason. Without a configuration (``vllm-governor check`` alone, policy
tests) the registry is the built-in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.settings import GovernorConfig
from daemon.sources import mqtt_signals, own_signals
from daemon.sources.declarations import SignalConflict, SignalRegistry
from daemon.sources.kinds import SOURCE_KINDS, DeclarationGroup, SourceKind

# Not a source: the governor counts its own batch traffic, and policies may read it.
_OWN = ("batch", own_signals.DECLARATIONS)


def _built_in(kinds: Sequence[SourceKind]) -> list[DeclarationGroup]:
    return [*((kind.key_path, kind.declarations) for kind in kinds if kind.declarations), _OWN]


BUILTIN = SignalRegistry.of(_built_in(SOURCE_KINDS))


def signal_registry(
    config: GovernorConfig, path: Path | None = None, kinds: Sequence[SourceKind] = SOURCE_KINDS
) -> SignalRegistry:
    """Every signal ``config`` declares with ``kinds``; ``path`` names the file in messages.

    Raises:
        ConfigError: a configured signal takes a name already declared by another source.
    """
    groups = [
        *_built_in(kinds),
        *(group for kind in kinds for group in kind.configured(config)),
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
