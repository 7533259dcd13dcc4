"""The controllers ``simulate`` knows, by name (no imports: the command line lists them cheaply)."""

from __future__ import annotations

STATIC_DEFAULT = "static-default"
NAIVE = "naive-script"
BEST_STATIC = "best-static"
PER_PHASE = "best-static-per-phase"
LIMITERS = ("gradient2", "aimd", "vegas")
GOVERNOR = "governor"
RESTART_ONLY = "governor-restart-only"
BASELINES = (STATIC_DEFAULT, NAIVE, BEST_STATIC, PER_PHASE, *LIMITERS, GOVERNOR, RESTART_ONLY)
