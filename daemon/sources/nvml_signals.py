"""The signals of the NVML source and how it is built, apart so that naming them costs no binding.

Each is a map keyed by ``gpu``, the NVML index (``gpu_temperature_celsius["0"]``).
``gpu_throttle_active`` carries a ``reason`` as well, so it is not a one-key map: policies read
``gpu_throttle_reasons_bitmask`` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from daemon.sources.declarations import SignalDeclaration, unit_of
from daemon.sources.polling import PlannedSource

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

log = logging.getLogger(__name__)

_MEANINGS = {
    "gpu_memory_used_bytes": "GPU memory in use",
    "gpu_memory_total_bytes": "GPU memory in all",
    "gpu_utilization_ratio": "GPU busy share, 0-1",
    "gpu_memory_utilization_ratio": "Memory controller busy share, 0-1",
    "gpu_temperature_celsius": "GPU temperature",
    "gpu_power_watts": "Power draw",
    "gpu_power_limit_watts": "Enforced power limit",
    "gpu_throttle_reasons_bitmask": "NVML clock-throttle reasons (0: not throttled)",
    "gpu_xid_errors_total": "XID errors seen",
    "gpu_ecc_uncorrected_errors_total": "Uncorrected ECC errors (volatile)",
}

DECLARATIONS = tuple(
    SignalDeclaration(name, "nvml", meaning, unit_of(name), key="gpu")
    for name, meaning in _MEANINGS.items()
)


def planned_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    """The NVML source when ``[sources.nvml]`` is enabled and a driver is there to read."""
    nvml = config.sources.nvml
    if not nvml.enabled:
        return
    # Imported here, not with the declarations: checking a policy needs no ctypes.
    from daemon.sources.nvml_presence import nvml_library_missing  # noqa: PLC0415

    if missing := nvml_library_missing(nvml.library_path or None):
        log.warning("no NVIDIA driver: NVML signals disabled", extra={"reason": missing})
        return
    # Imported only where a driver exists: the binding alone costs about 18 MB of memory.
    from daemon.sources.nvml_source import NvmlSource  # noqa: PLC0415

    gpus = NvmlSource(nvml.interval_s, nvml.timeout_s, nvml.library_path or None)
    yield PlannedSource(gpus, nvml.stale_after_s, nvml)
