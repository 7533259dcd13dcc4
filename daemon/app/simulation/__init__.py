"""``vllm-governor simulate``: the governor's real engine against the virtual-time simulator.

The package drives the simulated vLLM (:mod:`simulator`) second by second with either the
governor (real policies, planner, gate routing, a virtual actuation protocol and simulated
approvals) or a baseline (static settings, the naive free-memory script, off-the-shelf
limiters on an admission gate), then measures every controller on the same seeds:

- :mod:`.observe`: what the governor's sources would see (views, verification windows);
- :mod:`.actuation`, :mod:`.approvals`, :mod:`.admission`, :mod:`.governor`: the governor;
- :mod:`.baselines`: the alternatives;
- :mod:`.runs`, :mod:`.tallies`, :mod:`.metrics`, :mod:`.reports`: runs, counts, metrics, output.
"""
