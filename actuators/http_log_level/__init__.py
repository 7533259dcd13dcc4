"""The live log-level actuator: sets services' log levels over HTTP (Envoy's admin ``/logging``)."""

from __future__ import annotations
