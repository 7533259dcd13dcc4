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


def test_what_the_sources_scrape_changes_live() -> None:
    moved = config(url="http://127.0.0.1:9000", scrape_interval_s=5.0, scrape_timeout_s=3.0)
    assert restart_only_changes(config(), moved) == []
    quieter = GovernorConfig.model_validate(
        {
            "vllm": [{"name": "main", "url": "http://127.0.0.1:8000"}],
            "sources": {"host": {"enabled": False}, "nvml": {"interval_s": 30.0}},
        }
    )
    assert restart_only_changes(config(knobs={}), quieter) == []


def test_what_is_read_once_at_start_is_named() -> None:
    assert restart_only_changes(config(), config(gate={"enabled": True})) == ["vllm[main].gate"]
    mqtt = GovernorConfig.model_validate(
        {
            "vllm": [{"name": "main", "url": "http://127.0.0.1:8000"}],
            "sources": {"mqtt": {"enabled": True, "host": "127.0.0.1"}},
        }
    )
    assert restart_only_changes(config(knobs={}), mqtt) == ["sources.mqtt"]
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
        }
    )
    assert restart_only_changes(config(), two) == ["vllm: server(s) added (other)"]
    assert restart_only_changes(two, config()) == ["vllm: server(s) removed (other)"]
