"""Live signal sources (vLLM scrape, Prometheus, NVML, host, MQTT) and the signal store."""

from __future__ import annotations
