"""The ``[vllm.gate]`` table: defaults, and every bad value refused with its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.config_files import parse_config
from daemon.core.errors import ConfigError
from daemon.core.gate_settings import GateSettings

WHERE = Path("/etc/vllm-governor/config.toml")
HEAD = '[[vllm]]\nname = "a"\nurl = "http://127.0.0.1:8000"\n[vllm.gate]\nenabled = true\n'


def test_an_instance_has_no_gate_unless_configured() -> None:
    config = parse_config('[[vllm]]\nname = "a"\nurl = "http://x"\n', WHERE)
    assert config.vllm[0].gate == GateSettings()
    assert not config.vllm[0].gate.enabled


@pytest.mark.parametrize(
    "socket", ["/run/haproxy/a.sock", "unix@/run/haproxy/a.sock", "127.0.0.1:9999", "[::1]:9999"]
)
def test_a_gate_is_read_with_each_address_form(socket: str) -> None:
    config = parse_config(f'{HEAD}stats_socket = "{socket}"\nserver = "a-1"\n', WHERE)
    gate = config.vllm[0].gate
    assert (gate.enabled, gate.stats_socket, gate.backend, gate.server) == (
        True,
        socket,
        "vllm",
        "a-1",
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('server = "main;shutdown"', ": vllm.0.gate.server: not an HAProxy name"),
        ('backend = ""', ": vllm.0.gate.backend: not an HAProxy name"),
        ('stats_socket = "run/x.sock"', ": vllm.0.gate.stats_socket: a stats"),
        ('stats_socket = "localhost:0"', ": vllm.0.gate.stats_socket: a stats"),
        ("interval_s = 0", ": vllm.0.gate.interval_s: must be above 0"),
        ("timeout_s = 2.0", ": vllm.0.gate: timeout_s (2) must not exceed"),
        ("stale_after_s = 1.0", ": vllm.0.gate: stale_after_s (1) must exceed"),
        ("maxconn = 3", ": vllm.0.gate.maxconn: unknown key"),
    ],
)
def test_each_bad_value_names_its_key(line: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"{HEAD}{line}\n", WHERE)
    issues = [issue.render() for issue in caught.value.issues]
    assert len(issues) == 1, issues
    assert issues[0].startswith(str(WHERE)), issues
    assert expected in issues[0], issues
