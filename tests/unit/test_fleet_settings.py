"""The [fleet] section: off by default, validated like every other section."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.config_files import load_config
from daemon.core.errors import ConfigError


def test_without_the_section_the_fleet_is_off(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, ""))
    assert not config.fleet.enabled


def test_a_group_without_a_budget_of_its_own_has_the_fleets(tmp_path: Path) -> None:
    text = '[fleet]\nmax_unavailable = "25%"\ngroup_max_unavailable = { llama = 2 }\n' + _VLLM
    config = load_config(_write(tmp_path, text))
    assert config.fleet.budget_of("llama") == 2
    assert config.fleet.budget_of("mistral") == "25%"


def test_an_instance_without_a_group_is_a_group_of_its_own(tmp_path: Path) -> None:
    text = '[fleet]\nenabled = true\ngroups = { a = "llama" }\n' + _VLLM
    config = load_config(_write(tmp_path, text))
    assert config.fleet.group_of("a") == "llama"
    assert config.fleet.group_of("b") == "b"


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ('endpoints = ["127.0.0.1:2379"]', "fleet.endpoints: '127.0.0.1:2379' must be an http://"),
        ("endpoints = []", "fleet.endpoints: name at least one etcd member"),
        ('endpoints = ["http://u:p@127.0.0.1:2379"]', "must not hold credentials"),
        ('prefix = "governors"', "fleet.prefix: must start and end with /"),
        ('host = "a/b"', "fleet.host: must be a plain name"),
        ('groups = { a = "x y" }', "fleet.groups: group 'x y' of 'a' must be a plain name"),
        ('groups = { nosuch = "g" }', "fleet.groups names nosuch, not a [[vllm]] instance"),
        (
            "lease_ttl_s = 6\nrefresh_s = 3.0",
            "refresh_s (3) must be at most a third of lease_ttl_s",
        ),
        ("lease_ttl_s = 1", "fleet.lease_ttl_s: must be at least 2 (got 1)"),
        ("ttl = 5", "fleet.ttl: unknown key"),
        ("max_unavailable = 0", "fleet.max_unavailable: 0 must be at least 1"),
        ('max_unavailable = "150%"', "'150%' must be a count (1, 2...) or a share from 1% to 100%"),
        ('max_unavailable = "half"', "'half' must be a count"),
        ('group_max_unavailable = { llama = "0%" }', "llama: '0%' must be a count"),
        ("slot_wait_s = -1", "fleet.slot_wait_s: must be at least 0"),
    ],
)
def test_a_bad_fleet_section_is_refused_with_its_key(
    tmp_path: Path, section: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, f"[fleet]\n{section}\n{_VLLM}"))
    assert expected in str(caught.value)


_VLLM = '[[vllm]]\nname = "a"\nurl = "http://127.0.0.1:8000"\n[[vllm]]\nname = "b"\nurl = "http://127.0.0.1:8001"\n'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path
