"""The backtest's one error: an input it cannot use, said with where and what to do.

It derives from :class:`~daemon.core.errors.GovernorError`; library errors (file I/O,
Prometheus' client) are translated into it where they happen.
"""

from __future__ import annotations

from daemon.core.errors import GovernorError


class BacktestError(GovernorError):
    """A recording, a Prometheus range or an option that the backtest cannot use."""
