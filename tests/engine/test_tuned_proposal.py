"""A tuned change's proposal carries its counterfactual: Slack, the CLI, the store (issue 16).

The intent comes from a real what-if round (code-like traffic, a 50 ms TPOT objective, the 8B
profile) turned into a decision by :func:`daemon.whatif.tuning.tuned_decision`; the approvals
plane posts it through the real slack-sdk client to the wire-level Slack double. The message,
``proposals`` and the stored record show the predicted SLO attainment and goodput now and
after, the restart's cost and the workload the prediction rests on.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from daemon.app.commands.proposals import render
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.whatif.candidates import Setting
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.planning import PlanRequest, plan
from daemon.whatif.prediction import Slo
from daemon.whatif.summary import LengthSummary, WorkloadSummary
from daemon.whatif.tuning import tuned_decision
from simulator.synthetic_workloads import Z90
from tests.engine.test_approvals_slack import posted, press
from tests.support.slack_double import SlackDouble
from tests.support.slack_double.approvals_rig import ALICE, approvals_rig
from tests.support.slack_double.messages import CHANNEL, header, top_messages
from tests.support.tasks import eventually

pytestmark = pytest.mark.asyncio


def _lengths(median: float, p90: float, top: int) -> LengthSummary:
    fit = LogNormal(math.log(median), math.log(p90 / median) / Z90)
    return LengthSummary(1000, fit.mean, median, p90, p90 * 1.5, fit, top)


def tuned_intent() -> Decision:
    """A tune policy's round on code-like traffic, answered: lower the token budget."""
    summary = WorkloadSummary(
        instance="main",
        window_s=600,
        scrapes=300,
        rate_rps=8.0,
        count_cv=0.25,
        arrival_cv=1.0,
        scrape_interval_s=2.0,
        prompt=_lengths(4000, 8800, top=16_000),
        output=_lengths(60, 150, top=4_000),
    )
    current = Setting(1024, 8192)
    report = plan(
        PlanRequest(
            summary=summary,
            profile="llama-3.1-8b-h100-tp1",
            current=current,
            candidates=(current, Setting(1024, 2048)),
            slo=Slo(ttft_s=2.0, tpot_s=0.050),
            simulated_s=120,
            min_gain=0.10,
        )
    )
    due = Decision(
        policy="tpot-tune",
        target="main",
        at=0.0,
        kind=DecisionKind.TUNE,
        evidence=Evidence("tpot_p95_s > 0.05", {"tpot_p95_s": 0.15}, 120.0),
        intent=Intent({}, {"max_num_batched_tokens": 8192.0}, None, "approval"),
        details={"tune": {}},
    )
    tuned = tuned_decision(due, report)
    assert tuned.kind is DecisionKind.INTENT
    return tuned


async def test_the_slack_message_and_the_cli_carry_the_prediction(
    short_tmp: Path, double: SlackDouble
) -> None:
    decision = tuned_intent()
    facts = decision.details["whatif"]
    now, after = facts["now"], facts["after"]
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(decision)
        await eventually(lambda: len(top_messages(double)) == 1, "the proposal's message")
        message = top_messages(double)[0]
        [listed] = rig.plane.listing()
        [stored] = rig.plane.store.pending()
    assert header(message).startswith(
        ":raised_hand: Approval needed: max_num_batched_tokens 8192 → 2048"
    )
    text = str(message.blocks)
    assert "Predicted by the what-if" in text
    assert f"SLO attainment {now['slo_attainment']:.1%} → *{after['slo_attainment']:.1%}*" in text
    assert f"Goodput {now['goodput_rps']:.2f} → *{after['goodput_rps']:.2f}* req/s" in text
    assert f"~{facts['restart']['requests_lost']:.0f} requests lost" in text
    assert "8.00 req/s over the last 10 min" in text
    assert "prompt tokens p50/p90/p99 4000/8800/" in text
    assert "profile llama-3.1-8b-h100-tp1" in text
    # The effect and the cost fields are the prediction's, not the knob's generic meaning.
    assert f"goodput {now['goodput_rps']:.2f} → {after['goodput_rps']:.2f} req/s" in text
    # The CLI's listing and the store carry the same forecast.
    assert listed["forecast"]["now"] == {
        "slo_attainment": now["slo_attainment"],
        "goodput_rps": now["goodput_rps"],
    }
    assert listed["forecast"]["after"]["goodput_rps"] == after["goodput_rps"]
    printed = render([listed])
    assert f"predicted: predicted SLO attainment {now['slo_attainment']:.1%}" in printed
    assert "cost: restarts vLLM: ~" in printed
    assert "workload: 8.00 req/s over the last 10 min" in printed
    assert stored.record.proposal.forecast is not None
    assert stored.record.proposal.forecast.after.goodput_rps == after["goodput_rps"]


async def test_the_realised_effect_is_told_in_the_proposals_thread(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(tuned_intent())
        await eventually(lambda: len(top_messages(double)) == 1, "the proposal's message")
        message = top_messages(double)[0]
        await eventually(lambda: bool(rig.plane.store.pending()[0].ts), "its ts stored")
        told = await rig.plane.reply_in_thread("tpot-tune", "main", "realised: goodput error +1%")
        elsewhere = await rig.plane.reply_in_thread("other", "main", "no proposal of mine")
    assert told
    assert elsewhere
    [reply] = double.store.replies(CHANNEL, message.ts)
    assert reply.text == "realised: goodput error +1%"
    # A policy without a posted proposal on the target says it in the channel instead.
    assert [m.text for m in top_messages(double)][1:] == ["*main*: no proposal of mine"]


async def test_an_approved_tuned_change_hands_its_forecast_to_the_actuator(
    short_tmp: Path, double: SlackDouble
) -> None:
    # The actuator journals it with the change (tests/contract/test_vllm_actuator.py).
    async with approvals_rig(short_tmp, double) as rig:
        rig.actuator.knobs["max_num_batched_tokens"] = 8192.0
        rig.plane.propose(tuned_intent())
        message = await posted(double)
        [stored] = rig.plane.store.pending()
        await press(double, message, ALICE, "approve")
        await eventually(lambda: bool(rig.actuator.applied), "the change applied")
    [applied] = rig.actuator.applied
    assert stored.record.proposal.forecast is not None
    assert applied.forecast == stored.record.proposal.forecast.to_json()
