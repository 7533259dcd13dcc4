"""One what-if round from stored metrics to report: what the worker process runs.

The daemon's loop only copies the instance's series (:mod:`~daemon.whatif.series_snapshot`);
the rest, characterising the window, building the request and planning, is CPU work and
happens here, in the worker (or in the offline command's own process).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from daemon.core.settings import VllmInstance
from daemon.whatif.characterisation import characterise, observe_steps
from daemon.whatif.planning import WhatIfReport, plan
from daemon.whatif.requests import Question, plan_request
from daemon.whatif.series_snapshot import SeriesReader

# A window covered for less than this share of what was asked is said so in the notes.
_MOSTLY = 0.9


@dataclass(frozen=True, slots=True)
class Round:
    """Everything one round needs (picklable: it goes to the worker).

    Attributes:
        instance: The configured vLLM instance.
        series: Its series over the window (a snapshot, or the store itself offline).
        now: End of the window, on the clock of the points.
        window_s: Length of the window.
        in_force: The knob values its files set now (empty when unknown).
        question: What the person chose.
    """

    instance: VllmInstance
    series: SeriesReader
    now: float
    window_s: float
    in_force: dict[str, float]
    question: Question


def run_round(job: Round) -> WhatIfReport:
    """Characterise, build the request, plan; notes on assumptions go into the report.

    Raises:
        WhatIfError: too little data, or a profile or setting that cannot be simulated.
    """
    name = job.instance.name
    summary = characterise(job.series, name, job.now, job.window_s)
    steps = observe_steps(job.series, name, job.now, job.window_s)
    request, notes = plan_request(job.instance, summary, steps, job.in_force, job.question)
    if summary.window_s < _MOSTLY * job.window_s:
        notes.insert(
            0,
            f"the metrics cover {summary.window_s:.0f} s of the {job.window_s:.0f} s asked"
            " (the daemon started, or the server came up, since): the workload is that short one",
        )
    report = plan(request)
    return dataclasses.replace(report, notes=(*notes, *report.notes))
