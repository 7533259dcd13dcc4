"""The batch window as a policy: loading a ``batch`` action, and the lane's width it gives."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.batch.own_traffic import OwnTraffic
from daemon.core.errors import ConfigError
from daemon.policy.batch_lane import LaneWidth, fcfs_bound, lane_width
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import load_policy, parse_policy
from daemon.policy.online_signals import online_signals
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.testing.runner import run_file

WALL = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)  # a Wednesday, 03:00 UTC
FIRING = PolicyState(Phase.FIRING, since=0.0)

OPEN = """\
name: night-batch
when: running < 4.0 && ttft_p95_s < 0.5
for: 1m
clear: running > 8.0 || ttft_p95_s > 1.0
action:
  batch: {open: true, concurrency: "math.least(current + 2.0, 16.0 - running)"}
"""
CLOSE = """\
name: hands-off
when: waiting > 2.0
action:
  batch: {open: false}
"""


def _spec(text: str, name: str = "p.yaml") -> PolicySpec:
    return parse_policy(text, Path(name))


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, Path("p.yaml"))
    return [issue.render() for issue in caught.value.issues]


def test_an_opening_and_a_closing_batch_action_load() -> None:
    opening, closing = _spec(OPEN), _spec(CLOSE)
    assert opening.action is not None
    assert opening.action.batch is not None
    assert opening.action.batch.concurrency is not None
    assert opening.action.risk == "auto"  # live: nothing to approve
    assert opening.for_s == 60.0
    assert closing.action is not None
    assert closing.action.batch is not None
    assert closing.action.batch.concurrency is None


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("{batch: {open: true}}", r"p.yaml:3:\d+: action.batch.concurrency: an open lane needs"),
        (
            "{batch: {open: false, concurrency: 4}}",
            r"p.yaml:3:\d+: action.batch.concurrency: a closed lane has no concurrency",
        ),
        (
            "{batch: {concurrency: 0}}",
            r"p.yaml:3:\d+: action.batch.concurrency: 0 requests: an open lane takes at least 1",
        ),
        (
            '{batch: {concurrency: "current + runing"}}',
            r"p.yaml:3:\d+: action.batch.concurrency: unknown signal or function 'runing'",
        ),
        (
            '{batch: {concurrency: "running > 1.0"}}',
            r"p.yaml:3:\d+: action.batch.concurrency: a number of requests, not true or false",
        ),
        (
            "{batch: {concurrency: 4}, risk: approval}",
            r"p.yaml:3:\d+: action.risk: the batch lane is a live change",
        ),
        (
            "{batch: {concurrency: 4}, set: {max_num_seqs: 8}}",
            r"p.yaml:3:\d+: action: an action does exactly one thing.*batch lane",
        ),
        ("{batch: {open: maybe}}", r"p.yaml:3:\d+: action.batch.open:"),
    ],
)
def test_a_bad_batch_action_is_refused_with_its_file_and_line(action: str, expected: str) -> None:
    problems = _problems(f"name: p\nwhen: running < 4.0\naction: {action}\n")
    assert any(re.match(expected, problem) for problem in problems), problems


def test_a_firing_batch_policy_makes_no_intent_it_acts_through_its_firing() -> None:
    spec = _spec(OPEN)
    view = TargetView("main", {"running": 1.0, "ttft_p95_s": 0.2}, {})
    state, decisions = evaluate(spec, PolicyState(), view, 0.0, WALL)
    state, decisions = evaluate(spec, state, view, 61.0, WALL)
    assert state.phase is Phase.FIRING
    assert [d.kind.value for d in decisions] == ["fired"]


def _width(
    specs: list[PolicySpec],
    states: dict[str, PolicyState],
    signals: dict[str, float],
    current: int = 2,
    wall: datetime = WALL,
) -> tuple[int, str | None] | None:
    decided = lane_width(
        specs,
        {(name, "main"): state for name, state in states.items()},
        TargetView("main", signals, {}),
        wall,
        current=current,
        ceiling=10,
    )
    return None if decided is None else (decided.width, decided.policy)


QUIET = {"running": 3.0, "ttft_p95_s": 0.2, "waiting": 0.0}


def test_the_lane_is_as_wide_as_the_policies_say() -> None:
    opening, closing = _spec(OPEN), _spec(CLOSE)
    # No batch policy watches the target: not governed (the engine uses [batch] concurrency).
    assert _width([], {}, QUIET) is None
    # Watched, not firing: closed.
    assert _width([opening], {}, QUIET) == (0, None)
    # Firing: current + 2 = 4, under 16 - running = 13.
    assert _width([opening], {"night-batch": FIRING}, QUIET) == (4, "night-batch")
    # Online load: 16 - running(14) = 2 narrows it.
    assert _width([opening], {"night-batch": FIRING}, {**QUIET, "running": 14.0}) == (
        2,
        "night-batch",
    )
    # Never above the ceiling, never below 0.
    assert _width([opening], {"night-batch": FIRING}, QUIET, current=30) == (10, "night-batch")
    assert _width([opening], {"night-batch": FIRING}, {**QUIET, "running": 40.0}) == (
        0,
        "night-batch",
    )
    # A closing policy that fires wins over an opening one.
    both = {"night-batch": FIRING, "hands-off": FIRING}
    assert _width([opening, closing], both, QUIET) == (0, "hands-off")
    # A signal without a fresh value: hold where it is.
    assert _width([opening], {"night-batch": FIRING}, {"ttft_p95_s": 0.2}, current=3) == (
        3,
        "night-batch",
    )


def test_shadow_policies_never_steer_and_windows_bound_the_opening() -> None:
    shadow = _spec(OPEN + "mode: shadow\n")
    assert _width([shadow], {"night-batch": FIRING}, QUIET) is None
    nightly = _spec(OPEN + 'schedule: {windows: [{cron: "0 1 * * *", duration: 5h}]}\n')
    assert _width([nightly], {"night-batch": FIRING}, QUIET) == (4, "night-batch")
    noon = WALL.replace(hour=12)
    assert _width([nightly], {"night-batch": FIRING}, QUIET, wall=noon) == (0, None)


def test_under_fcfs_the_lane_is_tight() -> None:
    wide = LaneWidth(8, "night-batch", "night-batch: 8")
    seqs = {"max_num_seqs": 32.0}
    idle = {"waiting": 0.0, "running": 0.0}
    # A quarter of max-num-seqs at most.
    assert fcfs_bound(wide, TargetView("main", idle, seqs), 0.25).width == 8
    assert fcfs_bound(wide, TargetView("main", idle, seqs), 0.125).width == 4
    # Only the slots online requests leave free, one kept spare: 32 - 28 - 1 = 3.
    busy = fcfs_bound(wide, TargetView("main", {**idle, "running": 28.0}, seqs), 0.25)
    assert busy.width == 3
    assert "3 slot(s) free of online" in busy.reason
    full = fcfs_bound(wide, TargetView("main", {**idle, "running": 31.0}, seqs), 0.25)
    assert (full.width, full.policy) == (0, "night-batch")
    # One request while max-num-seqs is unknown.
    assert fcfs_bound(wide, TargetView("main", idle, {}), 0.25).width == 1
    # Closed while anything waits in vLLM, or while that is not known.
    waiting = fcfs_bound(wide, TargetView("main", {**idle, "waiting": 1.0}, seqs), 0.25)
    assert (waiting.width, waiting.policy) == (0, "night-batch")
    assert "wait in vLLM" in waiting.reason
    assert fcfs_bound(wide, TargetView("main", {"running": 0.0}, seqs), 0.25).width == 0
    assert fcfs_bound(wide, TargetView("main", {"waiting": 0.0}, seqs), 0.25).width == 0


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "policies"


def test_the_example_window_passes_its_policy_tests() -> None:
    result = run_file(EXAMPLE / "tests" / "batch-window.test.yaml")
    assert result.issues == ()
    assert [failure for case in result.cases for failure in case.failures] == []
    assert len(result.cases) == 3


def test_the_example_window_grows_while_tokens_are_fast_and_leaves_online_its_slots() -> None:
    spec = load_policy(EXAMPLE / "batch-window.yaml")
    firing = {"batch-window": FIRING}
    quiet = {"running": 3.0, "waiting": 0.0, "tpot_p95_s": 0.03}
    assert _width([spec], firing, quiet, current=4) == (5, "batch-window")  # + 1 a look
    assert _width([spec], firing, {**quiet, "tpot_p95_s": 0.06}, current=4) == (4, "batch-window")
    assert _width([spec], firing, {**quiet, "tpot_p95_s": 0.12}, current=4) == (3, "batch-window")
    assert _width([spec], firing, {**quiet, "running": 45.0}, current=8) == (3, "batch-window")
    assert _width([spec], firing, quiet, current=10) == (10, "batch-window")  # the ceiling


def test_an_opening_lane_may_not_fire_on_missing_data_a_closing_one_may() -> None:
    problems = _problems(OPEN + "on_no_data: assume_bad\n")
    assert any(
        re.match(r"p.yaml:\d+:\d+: on_no_data: an opening batch lane never acts on missing", p)
        for p in problems
    ), problems
    closing = _spec(CLOSE + "on_no_data: assume_bad\n")
    assert closing.action is not None
    assert closing.action.batch is not None


def test_a_lane_is_bounded_in_time_by_windows_not_opened_at_moments() -> None:
    problems = _problems(OPEN + 'schedule: {at: [{cron: "0 1 * * *"}]}\n')
    assert any(
        re.match(r"p.yaml:\d+:\d+: schedule.at: a batch lane is open while its policy fires", p)
        for p in problems
    ), problems


def test_under_fcfs_a_batch_request_queued_in_vllm_closes_the_lane() -> None:
    # vLLM full (8 of 8 running, 2 of them batch) and one more batch request queued: online
    # arrivals would wait behind it. Online, nothing waits, but no slot is free of online.
    raw = {"running": 8.0, "waiting": 1.0}
    online = online_signals(raw, OwnTraffic(3, 0.0, 0.0, 0.0))
    assert (online["waiting"], online["running"]) == (0.0, 6.0)
    view = TargetView("main", online, {"max_num_seqs": 8.0})
    assert fcfs_bound(LaneWidth(3, "night-batch", "3"), view, 0.5).width == 1  # 8 - 6 - 1
    full = TargetView("main", {**online, "running": 7.0}, {"max_num_seqs": 8.0})
    assert fcfs_bound(LaneWidth(3, "night-batch", "3"), full, 0.5).width == 0


PACED = OPEN.replace('16.0 - running)"}', '16.0 - running)", start_spacing: 250ms}')


def _decided(specs: list[PolicySpec], firing: list[str]) -> LaneWidth:
    decided = lane_width(
        specs,
        {(name, "main"): FIRING for name in firing},
        TargetView("main", QUIET, {}),
        WALL,
        current=2,
        ceiling=10,
    )
    assert decided is not None
    return decided


def test_a_paced_lane_spaces_its_starts_and_the_longest_firing_spacing_wins() -> None:
    paced = _spec(PACED)
    assert paced.action is not None
    assert paced.action.batch is not None
    assert paced.action.batch.start_spacing_s == 0.25
    slower = _spec(PACED.replace("night-batch", "slow-batch").replace("250ms", "1s"))
    unpaced = _spec(OPEN.replace("night-batch", "any-batch"))
    assert _decided([unpaced], ["any-batch"]).spacing_s == 0.0
    assert _decided([paced, unpaced], ["night-batch", "any-batch"]).spacing_s == 0.25
    both = _decided([paced, slower, unpaced], ["night-batch", "slow-batch", "any-batch"])
    assert (both.width, both.spacing_s) == (4, 1.0)
    # The fcfs bound narrows the lane and keeps its pace.
    view = TargetView("main", QUIET, {"max_num_seqs": 8.0})
    bounded = fcfs_bound(LaneWidth(4, "night-batch", "open", 0.25), view, 0.25)
    assert (bounded.width, bounded.spacing_s) == (2, 0.25)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            "{batch: {open: false, start_spacing: 1s}}",
            r"p.yaml:3:\d+: action.batch.start_spacing: a closed lane starts nothing",
        ),
        (
            "{batch: {concurrency: 4, start_spacing: soon}}",
            r"p.yaml:3:\d+: action.batch.start_spacing: neither a duration \(e.g. 250ms\) nor",
        ),
    ],
)
def test_a_bad_start_spacing_is_refused_with_its_file_and_line(action: str, expected: str) -> None:
    problems = _problems(f"name: p\nwhen: running < 4.0\naction: {action}\n")
    assert any(re.match(expected, problem) for problem in problems), problems


def test_a_spacing_may_be_a_cel_number_of_seconds_that_slows_the_pace_with_online_load() -> None:
    adaptive = _spec(PACED.replace("250ms", '"0.1 + running / 10.0"'))
    assert adaptive.action is not None
    assert adaptive.action.batch is not None
    assert adaptive.action.batch.start_spacing is not None

    def spacing(signals: dict[str, float], current_s: float = 0.0) -> LaneWidth | None:
        return lane_width(
            [adaptive],
            {("night-batch", "main"): FIRING},
            TargetView("main", signals, {}),
            WALL,
            current=2,
            ceiling=10,
            current_spacing_s=current_s,
        )

    quiet = spacing(QUIET)
    assert quiet is not None
    assert (quiet.width, quiet.spacing_s) == (4, 0.4)
    busier = spacing({**QUIET, "running": 9.0})
    assert busier is not None
    assert busier.spacing_s == 1.0
    # No fresh `running`: the width and the pace in force hold.
    held = spacing({"ttft_p95_s": 0.2}, current_s=0.7)
    assert held is not None
    assert (held.width, held.spacing_s) == (2, 0.7)
    # A spacing that comes out negative closes the lane.
    negative = spacing({**QUIET, "running": -5.0})
    assert negative is not None
    assert negative.width == 0
    assert "start_spacing gave" in negative.reason


@pytest.mark.parametrize(
    ("spacing", "expected"),
    [
        ('"running > 1.0"', "not true or false"),
        ('"current / 10.0"', "`current`"),
        ('"runing / 10.0"', "neither a duration"),
    ],
)
def test_a_cel_spacing_must_be_seconds_over_signals(spacing: str, expected: str) -> None:
    action = f"{{batch: {{concurrency: 4, start_spacing: {spacing}}}}}"
    problems = _problems(f"name: p\nwhen: running < 4.0\naction: {action}\n")
    assert any("action.batch.start_spacing" in p and expected in p for p in problems), problems


def test_the_example_window_paces_batch_prefill_slower_as_online_prefill_grows() -> None:
    spec = load_policy(EXAMPLE / "batch-window.yaml")
    own = {"batch_requests_per_s": 2.0, "batch_prompt_tokens_per_s": 3700.0}  # 1,850 a prompt

    def pace(prompt_tokens_per_s: float, pieces: float = 0.0) -> float:
        signals = {
            **QUIET,
            **own,
            "batch_piece_tokens": pieces,
            "tpot_p95_s": 0.03,
            "prompt_tokens_per_s": prompt_tokens_per_s,
        }
        decided = lane_width(
            [spec],
            {("batch-window", "main"): FIRING},
            TargetView("main", signals, {}),
            WALL,
            current=4,
            ceiling=64,
        )
        assert decided is not None
        return decided.spacing_s

    prompt_s = 1850 * 0.00001725  # the 8B's prefill of the lane's mean prompt
    assert pace(0.0) == pytest.approx(prompt_s / 0.07)  # 7% of the engine's time
    assert pace(1000.0) == pytest.approx(prompt_s / (0.07 - 1.2 * 0.01725))
    assert pace(20_000.0) == pytest.approx(prompt_s / 0.025)  # never above 2.5%
    # Prefilled in pieces, a collision costs a piece, not a prompt: three times the share.
    assert pace(0.0, pieces=256.0) == pytest.approx(prompt_s / 0.21)
    assert pace(20_000.0, pieces=256.0) == pytest.approx(prompt_s / 0.075)
