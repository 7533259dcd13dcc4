"""From a policy's view of one target to what an admission controller reads.

One pure mapping shared by the daemon's fast loop and ``vllm-governor simulate``, so both feed
a controller the same signals under the same names. A view holds only fresh values, so a name
absent from it is a None here, and a controller that needs it holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from daemon.policy.admission.signals import AdmissionSignals
from daemon.policy.evaluate import TargetView

# AdmissionSignals field -> the catalogue's short name it reads.
FIELD_SIGNALS: Mapping[str, str] = {
    "cap": "gate_cap",
    "in_flight": "gate_in_flight",
    "queued": "gate_queue",
    "latency_s": "ttft_p50_s",
    "ttft_p95_s": "ttft_p95_s",
    # Per request, as the SLO is judged (a request meets TPOT <= 100 ms or not), not vLLM's
    # per-token inter-token latency: in a token's p95 the steps that carry a prefill chunk
    # weigh as often as they occur, and on chat traffic it sat at the 80 ms budget while
    # every request met the SLO, so the gate was cut on a server that failed nothing.
    "tpot_p95_s": "request_tpot_p95_s",
    "preemptions_per_s": "preemptions_per_s",
    "gate_refusals_per_s": "gate_refusals_per_s",
    "gate_admitted_per_s": "gate_admitted_per_s",
    "gen_tokens_per_s": "gen_tokens_per_s",
}


# Every signal a controller reads: all the fast loop needs computed.
SIGNALS_READ = frozenset(FIELD_SIGNALS.values()) | {"errors_per_s", "rejections_per_s"}


def admission_signals(view: TargetView) -> AdmissionSignals:
    """The controller's signals from ``view``; a signal without fresh data is None.

    ``vllm_errors_per_s`` is vLLM's error finishes (``errors_per_s``) plus its own admission
    refusals (``rejections_per_s``) when that series exists: both are work vLLM dropped. Without
    ``errors_per_s`` it is None, whatever the refusals say: a drop count missing its main part
    would read as "no drops".
    """
    values = {field: _number(view.signals, name) for field, name in FIELD_SIGNALS.items()}
    errors = _number(view.signals, "errors_per_s")
    rejections = _number(view.signals, "rejections_per_s")
    if errors is not None and rejections is not None:
        errors += rejections
    return AdmissionSignals(**values, vllm_errors_per_s=errors)


def _number(signals: Mapping[str, Any], name: str) -> float | None:
    """The value of ``name`` as a float; None when absent, not a number, or not finite."""
    value = signals.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
