"""The what-if's one error: a question it cannot answer, and why."""

from __future__ import annotations

from daemon.core.errors import GovernorError


class WhatIfError(GovernorError):
    """A what-if could not be answered: too little data, no such target, a worker that failed.

    The message says what is missing and what to do; the default is to propose nothing.
    """
