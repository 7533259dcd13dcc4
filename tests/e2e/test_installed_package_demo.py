"""The demo as a new user runs it, from the installed package: its story, act by act.

One run per session (the ``installed_demo`` fixture, started by
``tests/e2e/test_installed_package.py``'s first test): ``vllm-governor demo --approve auto``
with the default pack as installed, its three minutes as ``make demo`` shows them. Everything
asserted comes from its ``--json`` summary, whose request counts the simulated server itself
wrote, from its output and from the processes left (none). The story's claims are asserted,
not only its machinery: a burst meets the admission gate, which holds part of it and refuses
what waits past its queue timeout, so that the act beats the same burst without a gate; the
traffic shifts, ``ttft-queue``'s what-if proposes a change with
its predicted effect, the approved change restarts the server with a drain, the governor
measures the effect against the prediction, and after the shift the run met the SLO for more
requests than the same workload on the starting settings did without the governor (simulated
in virtual time after the run), or, on a machine too busy for the real-time server to keep to
its model, the demo says the comparison is unfair. Then disk pressure: the server's log
directory passes ``log-disk``'s threshold, its approved change restarts the server at WARNING
without request lines, and the directory ends inside its budget, which the same server left
alone would have outgrown.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from daemon.app.demo.summary import BEHIND_WARNING_S
from tests.support.demo_checks import PNG_MAGIC, assert_consistent, assert_left_nothing
from tests.support.installed_wheel import DemoRun
from tests.support.xdist_groups import HEAVY

# One worker runs both files, in order (scripts/test runs two): the wheel is installed and the
# demo started once per worker, by the first test of test_installed_package.py.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(480),
    HEAVY,
]

STARTING = {"max_num_seqs": 64, "max_num_batched_tokens": 256}


def test_the_demo_ran_from_the_installed_package_to_its_end(installed_demo: DemoRun) -> None:
    summary = installed_demo.finish()
    assert_consistent(summary)
    assert "site-packages" in summary["policies"], summary["policies"]
    assert summary["interrupted"] is False
    assert installed_demo.plot_path.read_bytes().startswith(PNG_MAGIC)
    # The acting policies run on the demo's clock, and the demo says so.
    assert "on the demo's clock: ttft-queue waits 15 s instead of" in installed_demo.output
    assert "on the demo's clock: log-disk waits 10 s instead of 300 s" in installed_demo.output
    assert_left_nothing(installed_demo.output)


def test_the_shift_brings_a_tuned_proposal_with_its_prediction(installed_demo: DemoRun) -> None:
    summary = installed_demo.finish()
    proposal = _proposal(summary, "ttft-queue")
    assert proposal["change"].startswith("ttft-queue on main: ")
    assert "max_num_batched_tokens 256 -> " in proposal["change"]
    assert proposal["answer"] == "approve"
    assert proposal["accepted"] is True
    assert proposal["state"] == "verified"
    # The shift is at 30 s: the proposal comes after it, once the queue broke the SLO.
    assert proposal["made_at_s"] > 30
    prediction = proposal["prediction"]
    assert prediction["after"]["goodput_rps"] > prediction["now"]["goodput_rps"]
    assert prediction["predicted_gain"] >= 0.10  # the pack's min_gain
    assert "the what-if predicted SLO attainment" in installed_demo.output


def test_the_approved_change_drains_restarts_and_serves_the_pick(installed_demo: DemoRun) -> None:
    summary = installed_demo.finish()
    proposal = _proposal(summary, "ttft-queue")
    picked = re.search(r"max_num_batched_tokens 256 -> (\d+)", proposal["change"])
    assert picked is not None, proposal["change"]
    action = _action(summary, "ttft-queue")
    assert action["state"] == "done", action
    # Two restarts: the tuned change, then the disk act's quieter logs.
    assert summary["restarts"] == 2
    first, second, _ = summary["processes"]
    assert {k: first[k] for k in STARTING} == STARTING
    assert second["max_num_batched_tokens"] == int(picked.group(1))
    assert second["from_s"] is not None
    assert second["from_s"] > first["to_s"] > proposal["at_s"]
    # The restart drained (shutdown-timeout): nothing in flight was aborted; it cost the
    # arrivals refused while it drained and loaded.
    assert first["requests"]["aborted"] == 0
    assert summary["requests"]["aborted_by_restarts"] == 0
    assert summary["requests"]["rejected"] + summary["requests"]["missed_while_down"] > 0
    # The governor drained the gate first: no new request reached vLLM while it finished.
    assert re.search(r"the restart took \d+ s without taking new requests \(the gate drained", (
        installed_demo.output
    ))  # fmt: skip


def test_the_measured_effect_is_reported_against_the_prediction(
    installed_demo: DemoRun,
) -> None:
    summary = installed_demo.finish()
    [realised] = summary["realised"]
    assert realised["policy"] == "ttft-queue"
    assert realised["predicted"]["after"]["slo_attainment"] > 0
    assert realised["realised"]["slo_attainment"] > realised["predicted"]["now"]["slo_attainment"]
    assert isinstance(realised["goodput_error"], float)
    assert "measured: ttft-queue on main:" in installed_demo.output
    assert "(predicted " in realised["text"]


def test_each_act_is_told_with_and_without_the_governor(installed_demo: DemoRun) -> None:
    summary = installed_demo.finish()
    acts = _acts(summary)
    _, after, _ = acts
    counts = summary["requests"]
    judged = counts["arrived"] - counts["in_flight_at_end"]
    assert sum(act["with_governor"]["arrived"] for act in acts) == judged
    assert sum(act["with_governor"]["met_slo"] for act in acts) == counts["met_slo"]
    assert "per act, SLO attainment with the governor" in installed_demo.output
    # After the change the server met the SLO for more of what it completed than before it.
    comparison = summary["after_vs_before"]
    assert comparison["after"] > comparison["before"], comparison
    # After the shift, the governor's change (its restart included) beat leaving the settings
    # alone, unless the machine was too busy for the real-time server to keep to its model
    # (load average 18-22 here, before the disk act: 66%, 63% and 36% against 68%), which the
    # demo then says. The shift's act ends at 2:20, when log-disk acts: 72.6% against 68.5%
    # at load 9. The disk act's own restart is its price, told in the third act, not asserted
    # there (59.9-78.7% against 64-68%, as the restart took 14-20 s).
    with_, without = after["with_governor"], after["without_governor"]
    if summary["behind_schedule_s"] < BEHIND_WARNING_S:
        assert with_["slo_attainment"] > without["slo_attainment"], (with_, without)
    else:
        assert "warning: the machine was too busy for the simulated server" in (
            installed_demo.output
        )


def test_the_gate_absorbs_the_burst_and_leaves_the_shift_to_the_tuner(
    installed_demo: DemoRun,
) -> None:
    summary = installed_demo.finish()
    burst, after, _ = _acts(summary)
    assert "in the demo: admission-cap cuts the gate's cap to 48 at the lowest" in (
        installed_demo.output
    )
    # Without a gate the burst piles up in vLLM's queue (34.6% of the act in virtual time).
    without = burst["without_governor"]
    assert without["slo_attainment"] < 0.5, without
    # With it, the gate held part of the burst until the server had room and refused what
    # waited past its queue timeout: 86 held and 70 refused at load 1.2.
    with_ = burst["with_governor"]
    assert with_["gate"]["waited"] > 0, with_
    assert 0 < with_["gate"]["refused"] <= with_["arrived"] - with_["met_slo"], with_
    if summary["behind_schedule_s"] < BEHIND_WARNING_S:
        # 52.5% against 34.6% at load 1.2: the requests after the burst met the SLO again.
        assert with_["slo_attainment"] > without["slo_attainment"], (with_, without)
    # The cap stayed at 48 or more: the shift's overload reached vLLM's queue, ttft-queue
    # proposed its change (asserted above) and the gate did not refuse most of the act.
    assert after["with_governor"]["gate"]["refused"] < 0.2 * after["with_governor"]["arrived"]
    assert "the gate held" in installed_demo.output


def test_disk_pressure_brings_quieter_logs_and_the_directory_stays_in_budget(
    installed_demo: DemoRun,
) -> None:
    summary = installed_demo.finish()
    proposal = _proposal(summary, "log-disk")
    assert "enable_log_requests 1 -> 0" in proposal["change"]
    assert "log_level 20 -> 30" in proposal["change"]
    assert proposal["answer"] == "approve"
    assert proposal["accepted"] is True
    # After the tuned change: the directory passes 85% in the third act.
    assert proposal["made_at_s"] > _proposal(summary, "ttft-queue")["made_at_s"]
    assert _action(summary, "log-disk")["state"] == "done"
    # The restart kept the tuned setting: the last process serves the pick, at WARNING.
    second, third = summary["processes"][1:]
    assert third["from_s"] > second["to_s"] > proposal["at_s"]
    assert third["max_num_batched_tokens"] == second["max_num_batched_tokens"]
    logs = summary["logs"]
    with_, without = logs["with_governor"], logs["without_governor"]
    # It passed log-disk's threshold, then stopped growing: it ends inside its budget, which
    # the same server left at INFO with request lines outgrew before the end.
    assert with_["peak_share"] > 0.85
    assert with_["end_share"] < 1.0 < without["end_share"]
    assert without["full_at_s"] is not None
    assert "disk pressure: the log directory's budget is" in installed_demo.output


def _proposal(summary: dict[str, Any], policy: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        p for p in summary["proposals"] if p["change"].startswith(f"{policy} on ")
    ]
    [proposal] = found
    return proposal


def _action(summary: dict[str, Any], policy: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [a for a in summary["actions"] if a["policy"] == policy]
    [action] = found
    return action


def _acts(summary: dict[str, Any]) -> list[dict[str, Any]]:
    acts: list[dict[str, Any]] = summary["acts"]
    assert [act["name"] for act in acts] == ["a burst", "after the shift", "disk pressure"]
    return acts
