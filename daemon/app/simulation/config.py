"""The governor's configuration in simulation: a config.toml, or a built-in one.

Without ``--config`` the simulated governor runs with one instance, ``main``, actuated (a
``config_path`` that is never opened: the engine stands in for the file), the instance's
defaults for the restart envelope and verification, and envelopes for the two knobs the
default pack moves, as in ``config.example.toml``: max_num_seqs within [32, 1024], steps of at
most 256, 15 minutes' dwell, two changes an hour; max_num_batched_tokens within [2048, 16384],
steps of at most 4096, the same pacing.
"""

from __future__ import annotations

from pathlib import Path

from daemon.core.config_files import load_config
from daemon.core.settings import Envelope, GovernorConfig, VllmInstance

BUILT_IN = GovernorConfig(
    vllm=(
        VllmInstance(
            name="main",
            url="http://127.0.0.1:8000",
            unit="vllm@main.service",
            config_path=Path("/etc/vllm/main.yaml"),
            knobs={
                "max_num_seqs": Envelope(
                    min=32, max=1024, max_step=256, min_dwell_s=900, hourly_budget=2
                ),
                "max_num_batched_tokens": Envelope(
                    min=2048, max=16384, max_step=4096, min_dwell_s=900, hourly_budget=2
                ),
            },
        ),
    )
)


def load_simulation_config(path: Path | None) -> GovernorConfig:
    """``path``'s configuration, or the built-in one.

    Raises:
        ConfigError: the file is missing or invalid (every problem located).
    """
    return BUILT_IN if path is None else load_config(path)


def instance_of(config: GovernorConfig) -> VllmInstance:
    """The instance the simulation drives: the config's first.

    Raises:
        ValueError: the config has no [[vllm]] instance.
    """
    if not config.vllm:
        message = "the config has no [[vllm]] instance to simulate"
        raise ValueError(message)
    return config.vllm[0]
