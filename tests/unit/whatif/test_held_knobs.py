"""A what-if holds every knob the simulator takes at its value in force, besides the two it varies.

What the simulator models is its own: :class:`simulator.settings.EngineSettings`. A knob added
to the policies' catalogue and to the simulator is held by a what-if without a third list.
"""

from __future__ import annotations

from dataclasses import fields

from daemon.core.knobs import KNOBS
from daemon.whatif.candidates import TUNED
from daemon.whatif.planning import MODELED_KNOBS
from simulator.settings import EngineSettings


def test_every_knob_the_simulator_takes_is_held_with_the_knobs_type() -> None:
    taken = {setting.name for setting in fields(EngineSettings)} & set(KNOBS)
    assert set(MODELED_KNOBS) == taken - set(TUNED)
    assert all(kind is KNOBS[name].kind for name, kind in MODELED_KNOBS.items())
    # enable_log_requests too: the simulator records it, so the what-if's server has it.
    assert MODELED_KNOBS["enable_log_requests"] is bool
