"""vLLM Governor: keeps vLLM servers in their sweet spot.

The package is layered; each layer imports only the ones below it (checked by import-linter):

    daemon.app      command line, systemd glue, logging set-up
    daemon.engine   supervisor, the governor's long-lived tasks, control socket, own metrics
    daemon.policy   policy specs and their pure evaluation (reads the signals' vocabulary)
    daemon.sources  live signal sources, the signal store and the signals' vocabulary
    daemon.api      the small public facade that ``actuators`` may use
    daemon.core     types, errors, clocks, settings
"""

from __future__ import annotations
