"""The signals of the NVML source, declared apart so that naming them costs no NVML binding.

Each is a map keyed by ``gpu``, the NVML index (``gpu_temperature_celsius["0"]``).
``gpu_throttle_active`` carries a ``reason`` as well, so it is not a one-key map: policies read
``gpu_throttle_reasons_bitmask`` instead.
"""

from __future__ import annotations

from daemon.sources.declarations import SignalDeclaration, unit_of

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
