"""The NVML source: per-GPU memory, utilization, temperature, power, throttling and errors.

It reads NVIDIA's management library through its official binding, nvidia-ml-py (``pynvml``).
The binding opens ``libnvidia-ml.so.1`` by name, so the dynamic linker's search decides which
library it gets; ``library_path`` preloads a given file first, and a library already loaded
under that soname is the one the binding's ``dlopen`` returns.

Without a driver (no library, or the kernel module not loaded) the source logs one warning and
produces nothing, for good: NVML signals are then absent, never zero. A reading a GPU does not
support is skipped on that GPU from then on; any other NVML error fails the poll, so the
runner marks the source down and retries with backoff.

Free GPU memory is not a load signal for vLLM: it pre-allocates its KV cache (a share of the
GPU's memory set by ``gpu_memory_utilization``) at start, so ``gpu_memory_used_bytes`` stays
near that share whatever the load. Policies should read KV cache usage from vLLM's own metrics.

Signals, each labelled ``gpu`` (the NVML index), ``uuid`` and ``name``: ``gpu_memory_used_bytes``,
``gpu_memory_total_bytes``, ``gpu_utilization_ratio``, ``gpu_memory_utilization_ratio`` (memory
controller busy, 0-1), ``gpu_temperature_celsius``, ``gpu_power_watts``,
``gpu_power_limit_watts``, ``gpu_throttle_reasons_bitmask``, ``gpu_throttle_active{reason}``
(0/1), ``gpu_ecc_uncorrected_errors_total`` (volatile) and ``gpu_xid_errors_total`` (XID
critical errors seen since the source started).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
from dataclasses import dataclass, field
from typing import Any, Self

import pynvml

from daemon.core.errors import SourceError
from daemon.sources.blocking_calls import OneCallAtATime
from daemon.sources.nvml_readings import READINGS, Value
from daemon.sources.polling import PollResult
from daemon.sources.samples import Labels, Sample, SeriesKey, labels_of

log = logging.getLogger(__name__)

_NO_DRIVER = (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded)
_UNSUPPORTED = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound)
# Events left over are read at the next poll; the bound keeps one poll short.
_MAX_EVENTS_PER_POLL = 256


@dataclass
class _Gpu:
    index: int
    handle: Any
    labels: dict[str, str]
    skipped: set[str] = field(default_factory=set)  # readings this GPU does not support
    xids: int | None = None  # XIDs seen; None when the GPU cannot report them


class NvmlSource:
    """Polls every GPU that NVML sees."""

    name = "nvml"

    def __init__(
        self, interval_s: float, timeout_s: float, library_path: str | None = None
    ) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._library_path = library_path
        self._calls = OneCallAtATime("NVML")
        self._no_driver = False
        self._open = False
        self._gpus: list[_Gpu] = []
        self._events: Any = None

    async def __aenter__(self) -> Self:
        """Initialise NVML; without a driver, disable the source; other failures wait for poll."""
        self._no_driver = False
        try:
            # nvmlInit can hang on a GPU that fell off the bus; the source must still start.
            async with asyncio.timeout(self.timeout_s):
                await self._calls.run(self._start)
        except TimeoutError:
            log.warning("NVML not ready; retrying at each poll", extra={"error": "timeout"})
        except SourceError as exc:
            log.warning("NVML not ready; retrying at each poll", extra={"error": str(exc)})
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Shut NVML down, unless a call is stuck in it."""
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._calls.run(self._stop)
        except (SourceError, TimeoutError) as exc:
            log.debug("NVML left open", extra={"error": str(exc) or "timeout"})

    async def poll(self, now: float) -> PollResult:
        """Read every GPU; nothing, with ``detail="no-driver"``, when there is no driver."""
        if self._no_driver:
            return PollResult((), "no-driver")
        readings = await self._calls.run(self._read)
        if readings is None:
            return PollResult((), "no-driver")
        samples = tuple(
            Sample(SeriesKey(value.name, labels), value.value, now, self.name)
            for labels, value in readings
        )
        return PollResult(samples)

    def _start(self) -> None:
        try:
            if self._library_path is not None:
                ctypes.CDLL(self._library_path, mode=ctypes.RTLD_GLOBAL)
            pynvml.nvmlInit()
        except (OSError, *_NO_DRIVER) as exc:
            self._no_driver = True
            reason = str(exc) or type(exc).__name__
            log.warning("no NVIDIA driver: NVML signals disabled", extra={"reason": reason})
            return
        except pynvml.NVMLError as exc:
            message = f"NVML did not initialise: {exc}"
            raise SourceError(message, detail="nvml-init") from exc
        self._open = True
        try:
            self._gpus = self._discover()
        except pynvml.NVMLError as exc:
            self._stop()  # so that the next attempt starts from scratch
            message = f"NVML could not list the GPUs: {exc}"
            raise SourceError(message, detail="nvml-init") from exc
        self._events = self._watch_xids()
        log.info("NVML ready", extra={"driver": _driver_version(), "gpus": len(self._gpus)})

    def _stop(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            if self._events is not None:
                pynvml.nvmlEventSetFree(self._events)
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            log.debug("NVML shutdown failed", extra={"error": str(exc)})
        self._events, self._gpus = None, []

    def _discover(self) -> list[_Gpu]:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            labels = {"gpu": str(index)}
            for label, read in (
                ("uuid", pynvml.nvmlDeviceGetUUID),
                ("name", pynvml.nvmlDeviceGetName),
            ):
                # A label the GPU cannot give is simply left out.
                with contextlib.suppress(*_UNSUPPORTED):
                    labels[label] = str(read(handle))
            gpus.append(_Gpu(index, handle, labels))
        return gpus

    def _watch_xids(self) -> Any:
        """An event set every GPU that can report XID errors is registered with, or None."""
        try:
            events = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            log.debug("no XID events from this driver", extra={"error": str(exc)})
            return None
        for gpu in self._gpus:
            try:
                pynvml.nvmlDeviceRegisterEvents(
                    gpu.handle, pynvml.nvmlEventTypeXidCriticalError, events
                )
            except pynvml.NVMLError as exc:
                # XIDs are a bonus: the other readings still report a GPU in trouble.
                log.debug(
                    "no XID events from this GPU", extra={"gpu": gpu.index, "error": str(exc)}
                )
            else:
                gpu.xids = 0
        return events

    def _read(self) -> list[tuple[Labels, Value]] | None:
        """Every GPU's values, or None when there turned out to be no driver."""
        if not self._open:
            self._start()
            if self._no_driver:
                return None
        try:
            self._count_xids()
        except pynvml.NVMLError as exc:
            message = f"NVML could not read XID events: {exc}"
            raise SourceError(message, detail="nvml-error") from exc
        readings: list[tuple[Labels, Value]] = []
        for gpu in self._gpus:
            readings.extend(self._read_gpu(gpu))
        return readings

    def _read_gpu(self, gpu: _Gpu) -> list[tuple[Labels, Value]]:
        values: list[Value] = []
        for reading in READINGS:
            if reading.name in gpu.skipped:
                continue
            try:
                values.extend(reading.read(gpu.handle))
            except _UNSUPPORTED:
                gpu.skipped.add(reading.name)
                log.info(
                    "GPU reading unsupported", extra={"gpu": gpu.index, "reading": reading.name}
                )
            except pynvml.NVMLError as exc:
                message = f"NVML could not read {reading.name} of GPU {gpu.index}: {exc}"
                raise SourceError(message, detail="nvml-error") from exc
        if gpu.xids is not None:
            values.append(Value("gpu_xid_errors_total", float(gpu.xids)))
        return [(labels_of(gpu.labels | dict(value.labels)), value) for value in values]

    def _count_xids(self) -> None:
        if self._events is None:
            return
        by_address = {_address(gpu.handle): gpu for gpu in self._gpus}
        for _ in range(_MAX_EVENTS_PER_POLL):
            try:
                event = pynvml.nvmlEventSetWait_v2(self._events, 0)
            except pynvml.NVMLError_Timeout:
                return  # nothing pending
            gpu = by_address.get(_address(event.device))
            if gpu is None or gpu.xids is None:
                continue
            if event.eventType & pynvml.nvmlEventTypeXidCriticalError:
                gpu.xids += 1
                # Rare and serious (79: fell off the bus, 48: double-bit ECC): each is worth a line.
                log.warning("GPU XID error", extra={"gpu": gpu.index, "xid": int(event.eventData)})


def _address(handle: Any) -> int | None:
    """The address an opaque NVML handle points to, to match event devices to GPUs."""
    address: int | None = ctypes.cast(handle, ctypes.c_void_p).value
    return address


def _driver_version() -> str:
    try:
        return str(pynvml.nvmlSystemGetDriverVersion())
    except pynvml.NVMLError:
        return "unknown"  # only logged: not worth failing the source for
