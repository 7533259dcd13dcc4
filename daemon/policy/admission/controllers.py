"""The admission controllers by name: the governor's own first, then the baselines."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from daemon.policy.admission.aimd import Aimd
from daemon.policy.admission.gradient2 import Gradient2
from daemon.policy.admission.signals import AdmissionController
from daemon.policy.admission.slo_band import SloBand
from daemon.policy.admission.vegas import Vegas

CONTROLLERS: Mapping[str, Callable[..., AdmissionController[Any]]] = {
    "slo-band": SloBand,
    "gradient2": Gradient2,
    "aimd": Aimd,
    "vegas": Vegas,
}


def build_controller(
    kind: str, *, min_cap: int, max_cap: int, **params: float
) -> AdmissionController[Any]:
    """A controller of ``kind`` with its bounds and any of its own parameters.

    Raises:
        ValueError: An unknown kind, a parameter it does not have, or a bad value.
    """
    factory = CONTROLLERS.get(kind)
    if factory is None:
        message = f"unknown admission controller {kind!r}; known: {', '.join(CONTROLLERS)}"
        raise ValueError(message)
    try:
        return factory(min_cap=min_cap, max_cap=max_cap, **params)
    except TypeError as exc:
        message = f"{kind}: {exc}"
        raise ValueError(message) from exc
