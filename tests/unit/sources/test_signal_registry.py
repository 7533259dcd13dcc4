"""Signals are declared by their sources; the registry of a configuration gathers them."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.config_files import load_config, parse_config
from daemon.core.errors import ConfigError
from daemon.sources import prometheus_signals
from daemon.sources.catalogue import CATALOGUE
from daemon.sources.declarations import unit_of
from daemon.sources.registry import BUILTIN, signal_registry
from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore
from daemon.sources.view import ViewContext, signal_rows

ROOT = Path(__file__).resolve().parents[3]


def test_the_built_in_sources_declare_every_catalogue_name_and_their_maps() -> None:
    assert set(CATALOGUE) <= BUILTIN.names()
    assert {d.source for d in BUILTIN} == {"vllm", "haproxy", "nvml", "host", "governor"}
    gate_cap = BUILTIN.get("gate_cap")
    assert gate_cap is not None
    assert gate_cap.source == "haproxy"
    assert gate_cap.per_target
    assert BUILTIN.map_keys()["gpu_temperature_celsius"] == "gpu"
    assert BUILTIN.map_keys()["host_disk_usage_ratio"] == "path"
    assert "host_load1" in BUILTIN.shared_scalars()


def test_the_example_config_declares_its_prometheus_query_and_mqtt_subscription() -> None:
    registry = signal_registry(load_config(ROOT / "config.example.toml"))
    queue = registry.get("cluster_queue_depth")
    inlet = registry.get("rack_inlet_temperature_celsius")
    assert queue is not None
    assert (queue.source, queue.shape) == ("prometheus", "scalar")
    assert inlet is not None
    assert (inlet.source, inlet.unit) == ("mqtt", "celsius")
    assert BUILTIN.names() < registry.names()


def test_keyed_queries_and_subscriptions_are_maps(tmp_path: Path) -> None:
    text = (
        "[sources.prometheus]\n"
        'queries = { total = "sum(x)", by_model = { query = "sum by (model) (x)", '
        'key = "model", unit = "requests" } }\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "t/+/temp"\nsignal = "rack_temp"\nlabels = { rack = 1 }\nkey = "rack"\n'
        "[[sources.mqtt.subscriptions]]\n"
        'topic = "u/+/temp"\nsignal = "rack_temp"\nlabels = { rack = 1 }\nkey = "rack"\n'
    )
    registry = signal_registry(parse_config(text, tmp_path / "c.toml"))
    assert registry.map_keys()["by_model"] == "model"
    assert registry.map_keys()["rack_temp"] == "rack"
    by_model = registry.get("by_model")
    assert by_model is not None
    assert by_model.unit == "requests"
    assert "total" in registry.shared_scalars()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[sources.prometheus]\nqueries = { kv_usage = "sum(x)" }\n', "queries.kv_usage"),
        (
            '[sources.prometheus]\nqueries = { inlet = "sum(x)" }\n'
            '[[sources.mqtt.subscriptions]]\ntopic = "t"\nsignal = "inlet"\n',
            "subscriptions.0.signal",
        ),
    ],
)
def test_a_configured_name_may_not_shadow_another(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "c.toml"
    with pytest.raises(ConfigError) as raised:
        signal_registry(parse_config(text, path), path)
    (issue,) = raised.value.issues
    assert issue.key_path.endswith(where)
    assert "already declared" in issue.message


def test_a_key_must_be_one_of_the_subscriptions_labels(tmp_path: Path) -> None:
    text = '[[sources.mqtt.subscriptions]]\ntopic = "t/+"\nsignal = "s"\nlabels = { a = 1 }\n'
    with pytest.raises(ConfigError, match="key 'b' is not one of the labels"):
        parse_config(text + 'key = "b"\n', tmp_path / "c.toml")


def test_names_a_policy_cannot_write_are_left_out(tmp_path: Path) -> None:
    text = '[sources.prometheus]\nqueries = { "job:x:rate5m" = "sum(x)" }\n'
    assert "job:x:rate5m" not in signal_registry(parse_config(text, tmp_path / "c.toml"))


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("ttft_p95_s", "seconds"),
        ("preemptions_per_s", "per second"),
        ("gpu_temperature_celsius", "celsius"),
        ("cluster_queue_depth", ""),
    ],
)
def test_units_follow_prometheus_naming(name: str, unit: str) -> None:
    assert unit_of(name) == unit


def test_a_configured_signal_shows_as_no_data_before_its_first_value(tmp_path: Path) -> None:
    config = parse_config(
        '[sources.prometheus]\nenabled = true\nqueries = { a = "sum(x)", b = "sum(y)" }\n',
        tmp_path / "c.toml",
    )
    store = SignalStore()
    store.add([Sample(SeriesKey("a"), 1.0, 0.0, "prometheus")])
    context = ViewContext(
        now=0.0,
        window_s=60.0,
        stale_after=lambda _key: 60.0,
        targets=(),
        declared=prometheus_signals.declarations(config.sources.prometheus),
    )
    rows = {row.name: row for row in signal_rows(store, context)}
    assert (rows["a"].state, rows["a"].source) == ("ok", "prometheus")
    assert (rows["b"].state, rows["b"].source, rows["b"].value) == ("no_data", "prometheus", None)
