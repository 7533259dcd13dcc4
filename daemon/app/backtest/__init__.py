"""Backtests: recorded signal series replayed through policies, the would-have timeline out.

``vllm-governor backtest`` reads what the governor saw (a recording written by the daemon's
:mod:`~daemon.engine.evaluation.recorder`, or a Prometheus range imported into the same
format), replays it tick by tick through the daemon's own governor (its evaluator, planner,
router, actuation plane and approvals, on a virtual clock), and says what would have happened:

* :mod:`~daemon.app.backtest.recording` reads recordings (a torn line is skipped, located);
* :mod:`~daemon.app.backtest.promql` and :mod:`~daemon.app.backtest.prometheus_import` turn a
  Prometheus range into recorded ticks;
* :mod:`~daemon.app.backtest.governed` runs the daemon's Governor over the ticks, with the
  recording as its signal feed and clock (:mod:`~daemon.app.backtest.recorded_feed`) and the
  would-have actuator (:mod:`~daemon.app.backtest.would_have`) in place of the vLLM actuator;
* :mod:`~daemon.app.backtest.timeline` reads the would-have timeline back from its records;
* :mod:`~daemon.app.backtest.flaps` finds policies and knobs that flap;
* :mod:`~daemon.app.backtest.diff` compares two timelines of the same recording;
* :mod:`~daemon.app.backtest.report` writes timelines for people and for tools.
"""

from __future__ import annotations
