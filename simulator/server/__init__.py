"""A simulated vLLM 0.33 server in real time: ``vllm-governor sim serve``.

The same engine model as the virtual-time runs, driven by the event loop's clock and
behind vLLM's HTTP interface, so that the governor (or any client) cannot tell it from a
real server by the endpoints it uses:

* :mod:`~simulator.server.process` — the lifecycle: loading with the port closed, serving,
  draining on SIGTERM.
* :mod:`~simulator.server.driver` — the task that runs engine steps in real time.
* :mod:`~simulator.server.routes` and :mod:`~simulator.server.completions` — the HTTP API.
* :mod:`~simulator.server.metrics` and :mod:`~simulator.server.histograms` — ``/metrics``.
* :mod:`~simulator.server.load_replay` — ``--load``, a workload replayed against itself.
* :mod:`~simulator.server.options` — the command line resolved against the vLLM config.
"""

from __future__ import annotations
