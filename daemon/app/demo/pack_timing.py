"""The demo's copy of the policy pack: the acting policies on a clock that fits three minutes.

The pack's ``ttft-queue`` waits 3 minutes before it acts, replays the last 10 minutes of
traffic in its what-if and, after an approved change, measures the effect over as long again:
half an hour of story. The demo runs a copy of the pack in its temporary directory in which
that one policy waits :data:`DEMO_FOR_S` and looks back :data:`DEMO_WINDOW_S`, and says so when
it starts; every other policy, and everything else about this one (its condition, its knobs,
``min_gain``, cooldown, risk), is the pack's. The policy's what-if also simulates the demo's
server as it really is: the demo's engine profile (:func:`write_demo_profile`), whose restart
costs the drain and the few seconds of loading of the simulated server, not the minute of a
real 8B engine, so that the restart the proposal prices is the one the demo then measures.

The disk act's policy, ``log-disk``, waits 5 minutes before it acts; in the demo it waits
:data:`DEMO_LOG_FOR_S`, and it reads the demo's log directory where the pack reads
``/var/log`` (the pack says to change that key to where your vLLM logs go, and the demo's go
to its temporary directory); its threshold, hysteresis, action, risk and cooldown are the
pack's.

The first act's policy, ``admission-cap``, steers the admission gate all run; in the demo it
cuts no lower than :data:`DEMO_MIN_CAP`, so that the shift's lasting overload is left to
``ttft-queue`` (the reason is at the constant).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from daemon.policy.loading import load_policies
from daemon.policy.spec import PolicySpec
from simulator.shipped import PROFILE_DIR

STORY_POLICY = "ttft-queue"
"""The policy whose story the demo tells: TTFT breaks the SLO because requests queue."""
DEMO_FOR_S = 15.0
"""How long its condition must hold in the demo (the pack's: 3 minutes)."""
DEMO_WINDOW_S = 35.0
"""The traffic its what-if replays, and the window its effect is measured over, in the demo."""
LOG_POLICY = "log-disk"
"""The disk act's policy: quieter vLLM logs when the log volume fills up."""
LOG_PATH = "/var/log"
"""The path the pack's log-disk reads (``host_disk_usage_ratio["/var/log"]``)."""
DEMO_LOG_FOR_S = 10.0
"""How long log-disk's condition must hold in the demo (the pack's: 5 minutes)."""
GATE_POLICY = "admission-cap"
"""The first act's policy: it steers the admission gate's cap."""
DEMO_MIN_CAP = 48
"""admission-cap's floor in the demo (the pack's: 4): three quarters of the demo's 64 sequences.

Steered all run down to the pack's floor, the gate also sheds the shift's lasting overload:
in virtual time (seed 11) it cut 64 -> 4 at 0:30, on the burst's requests still in its 60 s
window, and held the shift there, so the tuned change realised 21.6% of the SLO against the
93.7% predicted. The gate still holds the burst at any floor (its queue timeout does that; the
cap did not move during the burst). At 32 the overload reached vLLM's queue and the tuned
change realised 95.5% (predicted 90.9%), but the cap held the tuned server at 32 for the rest
of the act in real time, and the disk act's restart, which opens a gate back to
``max-num-seqs``, let in more than the window before it: once in two runs the quieter logs'
verification failed and reverted them. At 48 (realised 99.8%, predicted 91.0%; in real time
99.8% against 91.5%) both changes were verified. docs/demo.md has the measurements."""


@dataclass(frozen=True, slots=True)
class Retimed:
    """What the demo's copy changed of the story's policy, to tell the user.

    Attributes:
        policy: The policy's name.
        for_s: Its ``for`` in the pack.
        window_s: Its tune ``window`` in the pack; None when it does not tune.
        demo_for_s: Its ``for`` in the demo.
        path: The directory it reads instead of the pack's ``/var/log``; None: unchanged.
    """

    policy: str
    for_s: float
    window_s: float | None
    demo_for_s: float = DEMO_FOR_S
    path: str | None = None
    min_cap: tuple[int, int] | None = None

    @property
    def prefix(self) -> str:
        """What the line is about: the demo's clock, or (a gate's floor) the demo itself."""
        return "in the demo" if self.min_cap is not None else "on the demo's clock"

    def line(self) -> str:
        """One sentence: what runs on the demo's clock, and what is as shipped."""
        if self.min_cap is not None:
            pack, demo = self.min_cap
            return (
                f"{self.policy} cuts the gate's cap to {demo} at the lowest instead of {pack}, "
                "so that the shift's lasting overload reaches vLLM's queue, where ttft-queue "
                "sees it; every other setting of it and every other policy is the pack's"
            )
        cut = f"waits {self.demo_for_s:g} s instead of {self.for_s:g} s"
        if self.window_s is not None:
            cut += f" and looks back {DEMO_WINDOW_S:g} s instead of {self.window_s:g} s"
        if self.path is not None:
            cut += f" and reads the demo's log directory instead of {LOG_PATH}"
        return (
            f"{self.policy} {cut}, so that its story fits in three minutes; every other "
            "setting of it and every other policy is the pack's"
        )


def story_policy(specs: Sequence[PolicySpec]) -> PolicySpec | None:
    """The pack's story policy, when it has one that acts."""
    return _acting(specs, STORY_POLICY)


def write_demo_pack(
    source: Path, into: Path, profile: Path, log_dir: Path | None = None
) -> list[Retimed]:
    """Copy the pack's policies from ``source`` into ``into``, the acting ones retimed.

    Only the policies (``*.yaml`` at the top) are copied; the pack's own tests stay behind.
    ``profile`` is the demo's engine profile, which a tuning story policy simulates;
    ``log_dir`` is the directory log-disk reads in the demo (None: it is copied as it is).
    Returns what was changed, story policy first; empty when the pack has neither policy
    (it then runs as it is).
    """
    into.mkdir(parents=True, exist_ok=True)
    specs = load_policies([source]).specs
    story = story_policy(specs)
    logs = None if log_dir is None else _acting(specs, LOG_POLICY)
    gate = _acting(specs, GATE_POLICY)
    retimed: list[Retimed] = []
    for policy in sorted(source.glob("*.yaml")):
        text = policy.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
        name = document.get("name") if isinstance(document, dict) else None
        if story is not None and name == story.name:
            tune = story.action.tune if story.action is not None else None
            retimed.insert(
                0, Retimed(story.name, story.for_s, None if tune is None else tune.window_s)
            )
            text = _retimed(document, profile)
        elif logs is not None and log_dir is not None and name == logs.name:
            retimed.append(Retimed(logs.name, logs.for_s, None, DEMO_LOG_FOR_S, str(log_dir)))
            text = _log_retimed(document, log_dir)
        elif gate is not None and name == gate.name:
            admission = gate.action.admission if gate.action is not None else None
            if admission is not None and admission.min_cap < DEMO_MIN_CAP:
                bound = (admission.min_cap, DEMO_MIN_CAP)
                retimed.append(Retimed(gate.name, gate.for_s, None, gate.for_s, min_cap=bound))
                text = _gate_bounded(document)
        (into / policy.name).write_text(text, encoding="utf-8")
    return retimed


def _acting(specs: Sequence[PolicySpec], name: str) -> PolicySpec | None:
    return next(
        (s for s in specs if s.name == name and s.action is not None and not s.shadow), None
    )


def _retimed(document: dict[str, Any], profile: Path) -> str:
    document["for"] = f"{DEMO_FOR_S:g}s"
    tune = (document.get("action") or {}).get("tune")
    if isinstance(tune, dict):
        tune["window"] = f"{DEMO_WINDOW_S:g}s"
        tune["profile"] = str(profile)
    header = "# The demo's copy: `for` and the tune window cut to fit three minutes.\n"
    return header + yaml.safe_dump(document, sort_keys=False)


def _log_retimed(document: dict[str, Any], log_dir: Path) -> str:
    document["for"] = f"{DEMO_LOG_FOR_S:g}s"
    key, demo_key = f'["{LOG_PATH}"]', f"[{json.dumps(str(log_dir))}]"
    for field in ("when", "clear"):
        if isinstance(document.get(field), str):
            document[field] = document[field].replace(key, demo_key)
    header = "# The demo's copy: `for` cut to fit three minutes, the demo's log directory read.\n"
    return header + yaml.safe_dump(document, sort_keys=False)


def _gate_bounded(document: dict[str, Any]) -> str:
    document["action"]["admission"]["min_cap"] = DEMO_MIN_CAP
    header = (
        "# The demo's copy: the cap's floor raised, so that the gate does not shed the shift's\n"
        "# lasting overload, which is the tuner's (daemon/app/demo/pack_timing.py).\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False)


def write_demo_profile(name: str, path: Path, restart_s: float) -> None:
    """The shipped profile ``name`` with the demo server's restart: ``restart_s``, no graphs.

    A real 8B engine is down about a minute to restart (the profile's ``restart_s``); the
    demo's simulated one drains for its ``shutdown-timeout`` and loads in seconds.
    """
    document = yaml.safe_load((PROFILE_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    document["restart_s"] = restart_s
    document["cuda_graph_capture_s"] = 0
    path.write_text(
        "# The demo's engine: the shipped profile, restarted as the demo's server is.\n"
        + yaml.safe_dump(document, sort_keys=False),
        encoding="utf-8",
    )
