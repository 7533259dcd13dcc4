"""A simulated vLLM V1 engine: a discrete-event model calibrated on published figures.

It stands in for vLLM where no GPU is at hand (the demo, the tests, every backtest) and knows
nothing of the governor: it is observed only through vLLM's own interfaces.
"""

from __future__ import annotations
