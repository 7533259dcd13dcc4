"""Backtests: recorded signal series replayed through policies, the would-have timeline out.

``vllm-governor backtest`` reads what the governor saw (a recording written by the daemon's
:mod:`~daemon.engine.evaluation.recorder`, or a Prometheus range imported into the same
format), replays it tick by tick through the real policy core, and says what would have happened:

* :mod:`~daemon.app.backtest.recording` reads recordings (a torn line is skipped, located);
* :mod:`~daemon.app.backtest.promql` and :mod:`~daemon.app.backtest.prometheus_import` turn a
  Prometheus range into recorded ticks;
* :mod:`~daemon.app.backtest.replay` runs the policies over the ticks as the evaluator would;
* :mod:`~daemon.app.backtest.flaps` finds policies and knobs that flap;
* :mod:`~daemon.app.backtest.diff` compares two timelines of the same recording;
* :mod:`~daemon.app.backtest.report` writes timelines for people and for tools.
"""

from __future__ import annotations
