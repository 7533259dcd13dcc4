"""The memory-floor bench's layers still run: each names modules and calls that must exist."""

from __future__ import annotations

import sys

from bench.footprint_floor import LAYERS, rss_after


def test_every_layer_runs_in_one_interpreter_and_costs_memory_over_the_bare_loop() -> None:
    bare_mib, _ = rss_after(sys.executable, LAYERS[0][1])
    everything_mib, _ = rss_after(sys.executable, "".join(code for _, code in LAYERS))
    # pydantic, CEL and the governor's modules are each several MiB: a layer that quietly
    # stopped loading what it names would leave the total near the bare process's.
    assert everything_mib > bare_mib + 20
