"""Policies read the signals the configuration declares: Prometheus queries, MQTT subscriptions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.app.cli import main
from daemon.core.config_files import parse_config
from daemon.core.errors import ConfigError
from daemon.policy.decisions import DecisionKind
from daemon.policy.evaluate import evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.state import PolicyState
from daemon.policy.views import target_views
from daemon.sources.registry import signal_registry
from daemon.sources.view import OK, SignalRow

ROOT = Path(__file__).resolve().parents[3]
CONFIG = (
    '[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:8000"\n'
    "[sources.prometheus]\n"
    'queries = { cluster_queue_depth = "sum(q)", '
    'queue_by_model = { query = "sum by (model) (q)", key = "model" } }\n'
    "[[sources.mqtt.subscriptions]]\n"
    'topic = "telemetry/+/gpu/+/inlet"\nsignal = "rack_inlet_temperature_celsius"\n'
    "labels = { host = 1, gpu = 3 }\n"
    "[[sources.mqtt.subscriptions]]\n"
    'topic = "rack/+/inlet"\nsignal = "inlet_by_rack"\nlabels = { rack = 1 }\nkey = "rack"\n'
)
POLICY = """
name: cluster-hot
when: >-
  cluster_queue_depth > 100.0 && queue_by_model["llama"] > 10.0
  && rack_inlet_temperature_celsius > 30.0 && inlet_by_rack["r1"] > 30.0
"""


def _row(name: str, value: float, source: str, **labels: str) -> SignalRow:
    return SignalRow(name, None, labels, value, source, 0.0, OK)


ROWS = [
    _row("cluster_queue_depth", 150.0, "prometheus"),
    _row("queue_by_model", 12.0, "prometheus", model="llama"),
    _row("queue_by_model", 1.0, "prometheus", model="qwen"),
    _row("rack_inlet_temperature_celsius", 31.0, "mqtt", host="n1", gpu="0"),
    _row("inlet_by_rack", 33.0, "mqtt", rack="r1"),
]


def test_a_policy_fires_on_prometheus_and_mqtt_signals(tmp_path: Path) -> None:
    signals = signal_registry(parse_config(CONFIG, tmp_path / "c.toml"))
    spec = parse_policy(POLICY, Path("p.yaml"), signals=signals)
    views = target_views(ROWS, ["main"], signals=signals)
    assert views["main"].signals["queue_by_model"] == {"llama": 12.0, "qwen": 1.0}
    _, decisions = evaluate(spec, PolicyState(), views["main"], 0.0, datetime.now(UTC))
    assert [d.kind for d in decisions] == [DecisionKind.FIRED]


def test_the_built_in_vocabulary_does_not_know_them() -> None:
    with pytest.raises(ConfigError, match="unknown signal or function 'cluster_queue_depth'"):
        parse_policy(POLICY, Path("p.yaml"))


def test_several_series_for_one_value_are_ambiguous_no_data(tmp_path: Path) -> None:
    signals = signal_registry(parse_config(CONFIG, tmp_path / "c.toml"))
    rows = [
        *ROWS,
        _row("rack_inlet_temperature_celsius", 20.0, "mqtt", host="n2", gpu="0"),
        _row("inlet_by_rack", 20.0, "mqtt", rack="r1", extra="x"),
    ]
    seen = target_views(rows, ["main"], signals=signals)["main"].signals
    assert "rack_inlet_temperature_celsius" not in seen
    assert seen["inlet_by_rack"] == {}
    assert seen["cluster_queue_depth"] == 150.0


def test_check_reads_the_configs_signals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "name: busy\nwhen: cluster_queue_depth > 100.0 && rack_inlet_temperature_celsius > 30.0\n"
    )
    example = str(ROOT / "config.example.toml")
    assert main(["check", "--config", example, str(policy)]) == 0
    assert capsys.readouterr().out.strip() == "ok: 2 file(s) valid"
    # Without a usable configuration, only the built-in sources' signals.
    assert main(["check", "--config", str(tmp_path / "none.toml"), str(policy)]) == 78
    assert "unknown signal or function 'cluster_queue_depth'" in capsys.readouterr().out


def test_check_refuses_the_hundred_by_hundred_comprehension(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hundred = "[" + ", ".join(str(i) for i in range(100)) + "]"
    policy = tmp_path / "p.yaml"
    policy.write_text(f"name: loops\nwhen: '{hundred}.all(i, {hundred}.all(j, i + j >= 0))'\n")
    assert main(["check", "--config", str(ROOT / "config.example.toml"), str(policy)]) == 78
    assert "CEL's budget of 10,000 steps" in capsys.readouterr().out


def test_schema_lists_the_signals_with_their_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema", "--signals", "--config", str(ROOT / "config.example.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    queue = next(line for line in lines if line.startswith("cluster_queue_depth "))
    assert queue.split()[1:3] == ["prometheus", "scalar"]
    gpu = next(line for line in lines if line.startswith("gpu_temperature_celsius "))
    assert gpu.split()[1:3] == ["nvml", "map[gpu]"]
