"""What the NVML source reads from one GPU: one reading per NVML call, turned into values.

A reading is the unit of "supported": when its NVML call answers ``NotSupported`` or the
driver lacks the function, the source skips that reading on that GPU from then on.

Units are converted to the base units of the signal names: bytes, ratios 0-1, degrees Celsius,
watts (NVML answers milliwatts and percents).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pynvml

from daemon.sources.samples import Labels

# The reasons a policy is likely to act on, named as in nvml.h (nvmlClocksEventReason...).
# Idle, application clocks and sync boost are routine and only show in the bitmask.
THROTTLE_REASONS: Mapping[str, int] = MappingProxyType(
    {
        "sw_power_cap": 0x04,
        "hw_slowdown": 0x08,
        "sw_thermal_slowdown": 0x20,
        "hw_thermal_slowdown": 0x40,
        "hw_power_brake": 0x80,
    }
)


@dataclass(frozen=True, slots=True)
class Value:
    """One value read from one GPU; the source adds the GPU's own labels."""

    name: str
    value: float
    labels: Labels = ()


@dataclass(frozen=True, slots=True)
class Reading:
    """One NVML call and the values it yields.

    Attributes:
        name: What is skipped when unsupported, in logs (``ecc``).
        read: Calls NVML with a device handle; raises the binding's ``NVMLError``.
    """

    name: str
    read: Callable[[Any], list[Value]]


def _memory(handle: Any) -> list[Value]:
    info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return [
        Value("gpu_memory_used_bytes", float(info.used)),
        Value("gpu_memory_total_bytes", float(info.total)),
    ]


def _utilization(handle: Any) -> list[Value]:
    rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
    return [
        Value("gpu_utilization_ratio", rates.gpu / 100),
        # How busy the memory controller was, not how full the memory is.
        Value("gpu_memory_utilization_ratio", rates.memory / 100),
    ]


def _temperature(handle: Any) -> list[Value]:
    celsius = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    return [Value("gpu_temperature_celsius", float(celsius))]


def _power(handle: Any) -> list[Value]:
    return [Value("gpu_power_watts", pynvml.nvmlDeviceGetPowerUsage(handle) / 1000)]


def _power_limit(handle: Any) -> list[Value]:
    return [Value("gpu_power_limit_watts", pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000)]


def _throttle(handle: Any) -> list[Value]:
    try:
        mask = int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except pynvml.NVMLError_FunctionNotFound:
        # Drivers before 535 only have the older name of the same call. Looking the newer
        # name up again at each poll costs one failed dlsym, far less than the call itself.
        mask = int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
    values = [Value("gpu_throttle_reasons_bitmask", float(mask))]
    values.extend(
        Value("gpu_throttle_active", 1.0 if mask & bit else 0.0, (("reason", reason),))
        for reason, bit in THROTTLE_REASONS.items()
    )
    return values


def _ecc(handle: Any) -> list[Value]:
    # Volatile: since the driver loaded, which is what "errors are happening now" needs.
    count = pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
    )
    return [Value("gpu_ecc_uncorrected_errors_total", float(count))]


READINGS: tuple[Reading, ...] = (
    Reading("memory", _memory),
    Reading("utilization", _utilization),
    Reading("temperature", _temperature),
    Reading("power", _power),
    Reading("power_limit", _power_limit),
    Reading("throttle_reasons", _throttle),
    Reading("ecc", _ecc),
)
