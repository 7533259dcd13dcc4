from __future__ import annotations

from pathlib import Path

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
