"""A reload is whole or refused: the settings read once at start are named when they change."""

from __future__ import annotations

from typing import Any

from daemon.core.reload_scope import restart_only_changes
from daemon.core.settings import Envelope, GovernorConfig

ENVELOPE = Envelope(min=8, max=64, max_step=16, min_dwell_s=0, hourly_budget=4)


def config(**server: Any) -> GovernorConfig:
    main = {"name": "main", "url": "http://127.0.0.1:8000", "knobs": {"max_num_seqs": ENVELOPE}}
    return GovernorConfig.model_validate({"vllm": [main | server]})


def test_what_the_rest_of_the_governor_reads_live_may_change() -> None:
    wider = ENVELOPE.model_copy(update={"max": 128})
    changed = config(
        knobs={"max_num_seqs": wider}, mode="dry-run", verify_window_s=60.0, ready_timeout_s=60.0
    )
    assert restart_only_changes(config(), changed) == []
    drain = {"enabled": True, "drain_timeout_s": 5.0}
    assert restart_only_changes(config(gate={"enabled": True}), config(gate=drain)) == []


def test_what_the_sources_read_once_is_named() -> None:
    moved = config(url="http://127.0.0.1:9000", scrape_interval_s=5.0, gate={"enabled": True})
    assert restart_only_changes(config(), moved) == [
        "vllm[main].url",
        "vllm[main].scrape_interval_s",
        "vllm[main].gate",
    ]
    two = GovernorConfig.model_validate(
        {
            "vllm": [
                {
                    "name": "main",
                    "url": "http://127.0.0.1:8000",
                    "knobs": {"max_num_seqs": ENVELOPE},
                },
                {"name": "other", "url": "http://127.0.0.1:8001"},
            ],
            "sources": {"host": {"enabled": False}},
        }
    )
    assert restart_only_changes(config(), two) == [
        "sources",
        "vllm: server(s) added (other)",
    ]
    assert restart_only_changes(two, config()) == [
        "sources",
        "vllm: server(s) removed (other)",
    ]
