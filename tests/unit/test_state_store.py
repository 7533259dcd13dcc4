from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.policy.planner import KnobHistory
from daemon.policy.state import Phase, PolicyState


def test_states_and_histories_survive_a_reboot_as_wall_clock_times(tmp_path: Path) -> None:
    path = tmp_path / "state" / "state.sqlite3"
    store = StateStore(path)
    # Before: the monotonic clock reads 1000 when the wall clock reads 1_700_000_000.
    before = 1_700_000_000.0 - 1000.0
    state = PolicyState(Phase.FIRING, 900.0, None, 950.0, (950.0,), "cooldown")
    store.save_states({("kv-thrash", "main"): state}, before)
    store.save_history(("main", "max_num_seqs"), KnobHistory(950.0, (950.0,)), before)
    store.close()
    # After a reboot the monotonic clock restarted: it reads 20 at wall time 1_700_000_100.
    after = 1_700_000_100.0 - 20.0
    store = StateStore(path)
    restored = store.load_states(after)[("kv-thrash", "main")]
    assert restored.phase is Phase.FIRING
    assert restored.blocked_by == "cooldown"
    # 100 s before "now" (monotonic 1000 -> 20 after 100 s of wall time): since = 20 - 200.
    assert restored.since == 20.0 - 200.0
    assert restored.last_action_at == 20.0 - 150.0
    assert restored.actions == (20.0 - 150.0,)
    history = store.load_history(after)[("main", "max_num_seqs")]
    assert history.last_change_at == 20.0 - 150.0


def test_decisions_are_logged_with_evidence_newest_first(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.sqlite3")
    evidence = Evidence("kv_usage > 0.9", {"kv_usage": 0.95}, 120.0)
    intent = Intent({"max_num_seqs": 192.0}, {"max_num_seqs": 256.0}, None, "approval")
    store.record(
        [
            Decision("p", "main", 10.0, DecisionKind.FIRED, evidence),
            Decision("p", "main", 10.0, DecisionKind.INTENT, evidence, intent),
        ],
        offset=1000.0,
    )
    newest, oldest = store.recent_decisions()
    assert (newest["kind"], newest["at"]) == ("intent", 1010.0)
    assert newest["intent"]["changes"] == {"max_num_seqs": 192.0}
    assert oldest["evidence"]["signals"] == {"kv_usage": 0.95}
    store.forget_policies(["other"])
    store.close()


class _StoppedClock:
    """A clock that reads what the test says: monotonic ``now``, wall = ``base`` + ``now``."""

    def __init__(self, now: float, base: float) -> None:
        self.now, self.base = now, base

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime.fromtimestamp(self.base + self.now, UTC)


def test_a_governor_that_starts_again_restarts_the_timers_it_did_not_watch(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "state.sqlite3")
    pending = PolicyState(Phase.PENDING, 900.0)  # `for` running since 900 s
    firing = PolicyState(Phase.FIRING, 500.0, 950.0, 600.0, (600.0,))  # clearing since 950 s
    store.save_states({("p", "main"): pending, ("f", "main"): firing}, 1_700_000_000.0)
    store.close()
    # The governor was down for an hour; it starts again at monotonic 10.
    ledger = PolicyLedger(
        StateStore(tmp_path / "state.sqlite3"), _StoppedClock(10.0, 1_700_004_600.0)
    )
    ledger.restore()
    assert ledger.states[("p", "main")].since == 10.0, "the hour down does not count toward `for`"
    restored = ledger.states[("f", "main")]
    assert restored.phase is Phase.FIRING
    assert restored.clearing_since is None, "nor toward keep_firing_for"
    assert restored.last_action_at is not None, "the last action carries over"
    assert restored.actions, "and so does the hourly budget"
    ledger.store.close()
