"""JSON Schemas of the policy file and of the policy test file, for editors and CI.

Both are generated from the pydantic models, the single source of truth, then given what an
editor shows (yaml-language-server: hover, completion, validation as you type): a description
and examples per field, and the names of the knobs and signals where keys name them. The
policy model's field descriptions live here, next to the schema, so that the spec stays a
plain statement of the format. ``docs/schemas/*.schema.json`` are these, committed; a test
regenerates them and fails when they differ (``vllm-governor schema [--tests]`` prints them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from daemon.core.knobs import KNOBS
from daemon.policy.spec import TUNABLE, PolicyModel
from daemon.policy.testing.models import PolicyTestsModel

DRAFT = "https://json-schema.org/draft/2020-12/schema"
FieldDoc = tuple[str, tuple[Any, ...]]  # description, examples

POLICY_FIELDS: Mapping[str, Mapping[str, FieldDoc]] = {
    "PolicyModel": {
        "name": ("Unique name: lower case, digits, - and _.", ("kv-thrash",)),
        "description": (
            "One sentence for people: status, approvals and the audit log show it.",
            (),
        ),
        "targets": (
            "Targets it watches: config.toml [[vllm]] instances and [[http_log_level]] "
            'services, by name; "*" is every target.',
            (["main"], ["*"]),
        ),
        "when": (
            "CEL condition over signals; signals are doubles (write 100.0, not 100). "
            "See docs/policies.md for the signal names.",
            ("preemptions_per_s > 0.5 && ttft_p95_s > 2.0",),
        ),
        "for": ("How long `when` must hold before the policy fires.", ("2m", "30s")),
        "clear": (
            "Exit condition (hysteresis): firing stops once this holds for keep_firing_for. "
            "Default: `when` no longer holds.",
            ("preemptions_per_s < 0.05",),
        ),
        "keep_firing_for": ("How long the exit condition must hold to stop firing.", ("5m",)),
        "on_no_data": (
            "When a signal has no fresh value: hold (change nothing), assume_ok (as if false), "
            "assume_bad (as if true, but only alert: never act on missing data).",
            ("hold",),
        ),
        "action": ("What to do when it fires; none: the policy only records that it fires.", ()),
        "cooldown": (
            "At most one action per cooldown while it keeps firing; it acts again each time "
            "the cooldown has passed and `when` still holds.",
            ("30m",),
        ),
        "budget_per_hour": ("At most this many actions of this policy per target per hour.", (2,)),
        "mode": ("shadow: decide and record what it would do, never act.", ("shadow",)),
        "schedule": ("Windows in which it may act; outside them it is blocked (schedule).", ()),
        "scope": (
            "instance: each target is changed on its own. group: the targets' fleet group is "
            "changed as one: one proposal for the group, applied to a canary first, judged "
            "against the members not yet changed, then rolled out within max_unavailable "
            "(docs/fleet.md). Needs action.set and an approval.",
            ("group",),
        ),
        "canary": (
            "How a group change's canary is judged (scope: group only): every threshold must "
            "hold over the window, else the canary is reverted and the rollout stops.",
            ({"window": "5m", "max_attainment_drop": "5%", "max_goodput_drop": "10%"},),
        ),
    },
    "CanaryModel": {
        "window": ("How long the canary runs changed before it is judged.", ("5m",)),
        "max_attainment_drop": (
            "The largest fall of SLO attainment against the unchanged members, in points.",
            ("5%",),
        ),
        "max_goodput_drop": (
            "The largest relative fall of goodput (requests within the SLO per second, per "
            "server) against the unchanged members.",
            ("10%",),
        ),
        "max_error_rate_rise": (
            "The largest rise of the share of failed requests, in points.",
            ("1%",),
        ),
        "min_requests": (
            "The fewest requests finished on each side for a verdict; fewer is inconclusive, "
            "and inconclusive fails.",
            (20,),
        ),
        "ttft_slo": (
            "The TTFT a request must meet to count within the SLO (attainment, goodput).",
            ("1s",),
        ),
    },
    "ActionModel": {
        "set": (
            "Knob -> CEL expression of its new value over `current` (the knob's value) and "
            "signals. The planner keeps it inside the knob's envelope.",
            ({"max_num_seqs": "math.greatest(current * 0.75, 32.0)"},),
        ),
        "operation": ("A named operation instead of knob values.", ("restart",)),
        "veto": (
            "While this policy fires on a server, no policy may move these knobs there the "
            "unsafe way (moves the safer way still pass).",
            (["max_num_seqs", "max_num_batched_tokens"],),
        ),
        "admission": (
            "While this policy fires on a server, a fast loop moves the admission cap at the "
            "proxy in front of it (live, no restart), within [min_cap, max-num-seqs]; when it "
            "stops firing, the cap goes back to max-num-seqs.",
            ({"controller": "slo-band", "every": "2s", "min_cap": 4},),
        ),
        "notify": (
            "Only tell people: a message when the policy fires (and again each cooldown while "
            "it fires), never a change. Its text may name the signals `when` reads.",
            ({"text": "KV cache at {kv_usage} on {target}", "channels": ["mqtt", "slack"]},),
        ),
        "tune": (
            "Ask a what-if for the values instead of a fixed step: the recent workload is "
            "replayed in the simulator for every max_num_seqs x max_num_batched_tokens inside "
            "the envelopes, and the best becomes the change, only when predicted to gain at "
            "least min_gain (see docs/whatif.md).",
            ({"knobs": ["max_num_seqs", "max_num_batched_tokens"], "min_gain": "10%"},),
        ),
        "batch": (
            "While this policy fires on a server, the batch lane there is open this wide "
            "(concurrency: a CEL number over signals and `current`, the lane's width now), "
            "or closed (open: false); the lane is closed when no batch policy fires (see "
            "docs/batch.md).",
            ({"open": True, "concurrency": "math.least(current + 2.0, 16.0 - running)"},),
        ),
        "risk": (
            "auto: applied by the governor; approval: a person approves it first. Default: "
            "approval for restarts and restart-required knobs (a tune always restarts), "
            "else auto.",
            ("approval",),
        ),
    },
    "NotifyModel": {
        "text": (
            "The message. {name} is replaced by the value of a signal `when` reads, or of "
            "policy, target, held_for, condition; nothing is evaluated. {{ and }} write braces.",
            ("KV cache at {kv_usage} on {target} for {held_for}",),
        ),
        "channels": (
            "Where it goes: mqtt (an event on the governor's events topic), slack.",
            (["mqtt", "slack"],),
        ),
    },
    "TuneModel": {
        "knobs": (
            "The knobs the what-if may move; the others stay as they are.",
            (["max_num_seqs", "max_num_batched_tokens"],),
        ),
        "objective": (
            "goodput: requests per second within the SLO (gain relative); slo_attainment: the "
            "share of requests within it (gain in points). Both count the restart's loss.",
            ("goodput",),
        ),
        "min_gain": (
            "The least predicted gain for a change to be asked for: 10% or 0.1.",
            ("10%",),
        ),
        "window": ("The recent window whose workload is replayed.", ("10m",)),
        "profile": (
            "The engine profile to simulate: a shipped name or a file. Default: "
            "llama-3.1-8b-h100-tp1.",
            ("llama-3.1-8b-h100-tp1",),
        ),
        "ttft_slo": ("The TTFT a request must meet.", ("2s",)),
        "tpot_slo": ("The TPOT a request must meet.", ("100ms",)),
        "max_error": (
            "After an applied change, the realised goodput is measured over a comparable "
            "window; an error larger than this quarantines the policy on that target.",
            ("30%",),
        ),
    },
    "BatchModel": {
        "open": ("true: open the lane (concurrency required); false: close it.", (True,)),
        "concurrency": (
            "How many batch requests may be in flight: a number, or a CEL number over signals "
            "and `current`; rounded down, within [0, [batch] concurrency].",
            ("current + 1.0",),
        ),
        "start_spacing": (
            "The least time between two batch requests' starts on the server: a duration, or "
            "a CEL number of seconds over signals (re-read every second): paces the lane's "
            "prefills so that no two land in one engine step. Among firing policies the "
            "longest wins. Default: none.",
            ("250ms", "0.5 + prompt_tokens_per_s / 20000.0"),
        ),
    },
    "AdmissionModel": {
        "controller": (
            "The controller: slo-band (the governor's own, SLO-aware), or the limiters "
            "gradient2, aimd, vegas.",
            ("slo-band",),
        ),
        "every": ("Time between two steps of the controller.", ("2s",)),
        "min_cap": ("The lowest cap the controller may set.", (4,)),
        "params": (
            "The controller's own parameters by name (see daemon/policy/admission/); an "
            "unknown one is a load error.",
            ({"ttft_target_s": 1.0},),
        ),
    },
    "ScheduleModel": {
        "windows": ("The policy may act only inside one of these windows.", ()),
        "at": (
            "A scheduled change: the policy acts at these moments only, once each (with "
            'when: "true" for an unconditional one, e.g. before a predictable peak).',
            (),
        ),
    },
    "AtModel": {
        "cron": (
            "When the change is due: five cron fields, minute first (APScheduler; use day "
            "names such as mon-fri).",
            ("45 7 * * mon-fri",),
        ),
        "timezone": ("The time zone of the cron expression (IANA name).", ("Europe/Paris",)),
    },
    "WindowModel": {
        "cron": (
            "When the window opens: five cron fields, minute first (APScheduler; use day "
            "names such as sat, since its weekday 0 is Monday).",
            ("0 2 * * sat",),
        ),
        "duration": ("How long the window stays open.", ("4h",)),
        "timezone": ("The time zone of the cron expression (IANA name).", ("Europe/Paris",)),
    },
}

# The envelope is config.toml's; a test file states one per simulated knob.
ENVELOPE_FIELDS: Mapping[str, Mapping[str, FieldDoc]] = {
    "Envelope": {
        "min": ("The lowest value the governor may set.", (32,)),
        "max": ("The highest value the governor may set.", (1024,)),
        "max_step": ("The largest change in one step.", (64,)),
        "min_dwell_s": ("Seconds a knob stays put after a change.", (900,)),
        "hourly_budget": ("At most this many changes of the knob per hour.", (2,)),
    },
}


def policy_schema() -> dict[str, Any]:
    """The JSON Schema of a policy file, with descriptions and examples."""
    schema = _described(PolicyModel.model_json_schema(by_alias=True), POLICY_FIELDS)
    action = _definition(schema, "ActionModel")["properties"]
    action["set"]["propertyNames"] = {"enum": sorted(KNOBS)}
    action["veto"]["items"]["enum"] = sorted(KNOBS)
    tune = _definition(schema, "TuneModel")["properties"]
    tune["knobs"]["items"]["enum"] = sorted(TUNABLE)
    return _headed(schema, "vLLM Governor policy", "One policy file (docs/policies.md).")


def policy_test_schema() -> dict[str, Any]:
    """The JSON Schema of a policy test file."""
    schema = _described(PolicyTestsModel.model_json_schema(by_alias=True), ENVELOPE_FIELDS)
    description = "A policy test file, run by `vllm-governor test` (docs/policies.md)."
    return _headed(schema, "vLLM Governor policy test", description)


def render(schema: Mapping[str, Any]) -> str:
    """The text committed under ``docs/schemas/``: stable, indented, ending in a newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _described(
    schema: dict[str, Any], docs: Mapping[str, Mapping[str, FieldDoc]]
) -> dict[str, Any]:
    for model, fields in docs.items():
        properties = _definition(schema, model).get("properties", {})
        for name, (description, examples) in fields.items():
            if name in properties:
                properties[name]["description"] = description
                if examples:
                    properties[name]["examples"] = list(examples)
    return schema


def _definition(schema: dict[str, Any], model: str) -> dict[str, Any]:
    if schema.get("title") == model:
        return schema
    definition: dict[str, Any] = schema["$defs"][model]
    return definition


def _headed(schema: dict[str, Any], title: str, description: str) -> dict[str, Any]:
    return {"$schema": DRAFT, **schema, "title": title, "description": description}
