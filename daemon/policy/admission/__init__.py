"""Fast-loop controllers of the admission cap at the gate in front of vLLM (HAProxy's maxconn).

Each controller is a frozen spec with a pure ``step(state, signals, now) -> Step``: the next
state and the cap to set, or None to leave the gate as it is. The engine's shell feeds it the
gate's and vLLM's signals every tick and hands a new cap to the HAProxy actuator. Every cap a
controller returns lies within ``[min_cap, max_cap]``, where ``max_cap`` is the instance's
``max-num-seqs`` (the gate never admits more than vLLM would run); a missing or stale signal
it needs means hold, with the state unchanged.

- :mod:`~daemon.policy.admission.slo_band`: the governor's own, SLO-aware;
- :mod:`~daemon.policy.admission.gradient2`, :mod:`~daemon.policy.admission.aimd`,
  :mod:`~daemon.policy.admission.vegas`: the off-the-shelf limiters it is compared with.
"""

from __future__ import annotations
