from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from daemon.core.config_files import load_config, parse_config
from daemon.core.errors import ConfigError
from daemon.core.settings import GovernorConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.toml"
WHERE = Path("/etc/vllm-governor/config.toml")


def _issues(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, WHERE)
    return [issue.render() for issue in caught.value.issues]


def test_an_empty_file_means_every_default() -> None:
    assert parse_config("", WHERE) == GovernorConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[governor]\nstate_dir = \n", f"{WHERE}:2:13: TOML syntax error: Invalid value"),
        ("[governor\n", f"{WHERE}:1:10: TOML syntax error:"),
        ('x = "unterminated\n', f"{WHERE}:1:"),
        ("[metrics]\nlisten_prot = 1\n", f"{WHERE}:2:1: metrics.listen_prot: unknown key"),
        (
            "\n\n[metrics]\nlisten_port = '9877'\n",
            f"{WHERE}:4:1: metrics.listen_port: expected a whole number",
        ),
        (
            "[metrics]\nenabled = 'yes'\n",
            f"{WHERE}:2:1: metrics.enabled: expected true or false",
        ),
        (
            "[metrics]\nlisten_port = 70000\n",
            f"{WHERE}:2:1: metrics.listen_port: must be at most 65535",
        ),
        (
            "[governor]\nevaluation_interval_s = 0\n",
            f"{WHERE}:2:1: governor.evaluation_interval_s: must be above 0",
        ),
        (
            "[governor]\nevaluation_interval_s = nan\n",
            f"{WHERE}:2:1: governor.evaluation_interval_s:",
        ),
        (
            "[logging]\nlevel = 'LOUD'\n",
            f"{WHERE}:2:1: logging.level: expected 'DEBUG', 'INFO', 'WARNING' or 'ERROR'",
        ),
        (
            "[nonsense]\na = 1\n",
            # The list of sections grows with features: only its start is pinned here.
            f"{WHERE}:1:2: nonsense: unknown key (allowed here: ",
        ),
        ("governor = 3\n", f"{WHERE}:1:1: governor: expected a mapping of keys to values"),
        (
            "[slack]\nsigning_secret = 'abc'\n",
            f"{WHERE}:2:1: slack.signing_secret: secrets are never read from the config file: set VLLM_GOVERNOR_SLACK_SIGNING_SECRET",
        ),
    ],
)
def test_each_problem_names_file_line_column_and_key(text: str, expected: str) -> None:
    issues = _issues(text)
    assert len(issues) == 1, issues
    assert issues[0].startswith(expected), issues


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    issues = _issues("[metrics]\nlisten_port = 'x'\nbogus = 1\n[logging]\nlevel = 1\n")
    assert [issue.split(": ")[0] for issue in issues] == [
        f"{WHERE}:2:1",
        f"{WHERE}:3:1",
        f"{WHERE}:5:1",
    ]


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "absent.toml")


def test_the_example_config_is_valid() -> None:
    load_config(EXAMPLE)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _entry_model(annotation: Any) -> Any:
    """The model of a table of entries (``dict[str, M]`` or ``tuple[M, ...]``), else None."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and _is_model(args[1]):
        return args[1]
    if origin in (tuple, list) and args and _is_model(args[0]):
        return args[0]
    return None


def _field_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every leaf field of the schema; a table of named entries contributes ``*``."""
    paths: set[tuple[str, ...]] = set()
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        if _is_model(annotation):
            paths |= _field_paths(annotation, (*prefix, name))
        elif (entry := _entry_model(annotation)) is not None:
            paths |= _field_paths(entry, (*prefix, name, "*"))
        else:
            paths.add((*prefix, name))
    return paths


def _written_paths(
    document: dict[str, Any], schema: type[BaseModel], prefix: tuple[str, ...] = ()
) -> set[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()
    for key, value in document.items():
        annotation: Any = schema.model_fields[key].annotation
        if _is_model(annotation):
            paths |= _written_paths(value, annotation, (*prefix, key))
        elif (entry_model := _entry_model(annotation)) is not None:
            entries = value.values() if isinstance(value, dict) else value
            for entry in entries:
                paths |= _written_paths(entry, entry_model, (*prefix, key, "*"))
        else:
            paths.add((*prefix, key))
    return paths


def test_the_example_config_sets_and_documents_every_field() -> None:
    text = EXAMPLE.read_text()
    written = _written_paths(tomllib.loads(text), GovernorConfig)
    assert written == _field_paths(GovernorConfig)
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            assert lines[number - 1].lstrip().startswith("#"), f"field without a comment: {line}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[vllm]]\nname = "Main"\nurl = "http://127.0.0.1:8000"\n',
            ":2:1: vllm.0.name: must match the pattern",
        ),
        (
            '[[vllm]]\nname = "a"\nurl = "ftp://x"\n',
            ":3:1: vllm.0.url: must be an http:// or https:// URL",
        ),
        (
            '[[vllm]]\nname = "a"\nscrape_interval_s = 1.0\n',
            ":1:3: vllm.0.url: required key is missing",
        ),
        (
            '[[vllm]]\nname = "a"\nurl = "http://x"\n[[vllm]]\nname = "b"\nurl = "http://x"\nstale_after = 3\n',
            ":7:1: vllm.1.stale_after: unknown key (did you mean 'stale_after_s'? allowed here: config_path, drain, env_file, gate, knobs, max_label_values, max_page_bytes, max_page_samples, mode, name, python, ready_timeout_s, restart_command, restart_hourly_budget, restart_min_interval_s, restart_timeout_s, scrape_interval_s, scrape_timeout_s, server_log_command, server_log_file, stale_after_s, unit, url, verify_max_error_rate_increase, verify_max_preemption_rate_increase, verify_max_ttft_p95_ratio, verify_window_s)",
        ),
        (
            '[[vllm]]\nname = "a"\nurl = "http://x"\n[[vllm]]\nname = "a"\nurl = "http://y"\n',
            ":1:3: vllm: vLLM instance names must be unique; repeated: a",
        ),
    ],
)
def test_vllm_tables_are_validated_per_entry(text: str, expected: str) -> None:
    issues = _issues(text)
    assert issues[0].startswith(f"{WHERE}{expected}"), issues


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            'config_path = "/etc/vllm/a.yaml"\n',
            ":1:3: vllm.0: restart_command uses {unit} but unit is not set",
        ),
        (
            'restart_command = ["sh", "-c", "{cmd}"]\n',
            ":4:1: vllm.0.restart_command: {cmd} is not substituted; only {unit} is",
        ),
        (
            "restart_command = []\n",
            ":4:1: vllm.0.restart_command: must name a program",
        ),
        (
            'drain = "sigkill"\n',
            ":4:1: vllm.0.drain: expected 'shutdown-timeout' or 'pause'",
        ),
        ('mode = "yolo"\n', ":4:1: vllm.0.mode: expected 'active' or 'dry-run'"),
        (
            "verify_max_ttft_p95_ratio = 0.5\n",
            ":4:1: vllm.0.verify_max_ttft_p95_ratio: must be at least 1.0 (got 0.5)",
        ),
    ],
)
def test_actuation_settings_are_checked(table: str, expected: str) -> None:
    issues = _issues(f'[[vllm]]\nname = "a"\nurl = "http://x"\n{table}')
    assert issues[0].startswith(f"{WHERE}{expected}"), issues


def test_the_restart_command_substitutes_only_the_unit() -> None:
    text = (
        '[[vllm]]\nname = "a"\nurl = "http://x"\nunit = "vllm@a.service"\n'
        'config_path = "/etc/vllm/a.yaml"\n'
    )
    instance = parse_config(text, WHERE).vllm[0]
    assert instance.restart_argv() == ("systemctl", "restart", "vllm@a.service")
    assert instance.mode == "active"
    assert instance.env_file is None


def test_a_config_holding_only_one_vllm_server_is_valid() -> None:
    config = parse_config('[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:8000/"\n', WHERE)
    assert [(v.name, v.url) for v in config.vllm] == [("main", "http://127.0.0.1:8000")]


def test_an_unlabelled_mqtt_wildcard_is_refused_where_it_is_written() -> None:
    text = (
        "[sources.mqtt]\nenabled = true\n"
        '[[sources.mqtt.subscriptions]]\ntopic = "t/+/x"\nsignal = "s"\n'
    )
    issues = _issues(text)
    assert issues == [
        f"{WHERE}:3:3: sources.mqtt.subscriptions.0: wildcard segment(s) [1] have no "
        "label: messages of different topics would mix in one series"
    ]


def test_an_enabled_prometheus_source_needs_queries() -> None:
    issues = _issues("[sources.prometheus]\nenabled = true\n")
    assert issues == [
        f"{WHERE}:1:2: sources.prometheus: an enabled Prometheus source needs at "
        "least one entry in queries"
    ]
