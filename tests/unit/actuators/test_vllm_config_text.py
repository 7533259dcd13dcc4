from __future__ import annotations

import pytest

from actuators.vllm.config_text import (
    knob_value,
    read_env,
    read_yaml_options,
    rendered,
    set_env_var,
    set_yaml_option,
)
from actuators.vllm.registry import V0_33
from daemon.api import ActuationRefused

WHERE = "/etc/vllm/main.yaml"


def test_options_are_read_in_either_spelling() -> None:
    options = read_yaml_options("max_num_seqs: 64\nmax-num-batched-tokens: 4096\n", WHERE)
    assert options == {"max-num-seqs": 64, "max-num-batched-tokens": 4096}
    assert read_yaml_options("", WHERE) == {}


@pytest.mark.parametrize("text", ["max_num_seqs: 1\nmax-num-seqs: 2\n", "- a\n- b\n", "a: [\n"])
def test_unusable_files_are_refused(text: str) -> None:
    with pytest.raises(ActuationRefused):
        read_yaml_options(text, WHERE)


def test_an_edit_changes_one_line_and_keeps_comments_order_and_spelling() -> None:
    text = "# main server\nmodel: m\nmax_num_seqs: 64   # tuned\nport: 8000\n"
    edited = set_yaml_option(text, "max-num-seqs", "32", WHERE)
    assert edited == "# main server\nmodel: m\nmax_num_seqs: 32   # tuned\nport: 8000\n"


def test_a_missing_option_is_appended() -> None:
    assert (
        set_yaml_option("model: m", "max-num-seqs", "32", WHERE) == "model: m\nmax-num-seqs: 32\n"
    )
    assert set_yaml_option("", "watermark", "0.05", WHERE) == "watermark: 0.05\n"


def test_a_block_value_is_not_rewritten() -> None:
    with pytest.raises(ActuationRefused, match="not a one-line value"):
        set_yaml_option("max-num-seqs:\n  - 1\n", "max-num-seqs", "2", WHERE)


@pytest.mark.parametrize(
    ("knob", "value", "text"),
    [
        ("max_num_seqs", 128.0, "128"),
        ("watermark", 0.00001, "1.0e-05"),
        ("enable_log_requests", 1.0, "true"),
        ("log_level", 30.0, "WARNING"),
        ("uvicorn_log_level", 40.0, "error"),
    ],
)
def test_values_are_written_as_vllm_reads_them(knob: str, value: float, text: str) -> None:
    assert rendered(V0_33.flag(knob), value) == text


@pytest.mark.parametrize(
    ("knob", "value"), [("max_num_seqs", 0.0), ("log_level", 25.0), ("watermark", 1.0)]
)
def test_values_vllm_would_refuse_are_refused(knob: str, value: float) -> None:
    with pytest.raises(ActuationRefused):
        rendered(V0_33.flag(knob), value)


def test_values_are_read_back_or_unknown() -> None:
    options = {"max-num-seqs": "64", "uvicorn-log-level": "warning", "enable-log-requests": True}
    env = {"VLLM_LOGGING_LEVEL": "debug"}
    assert knob_value(V0_33.flag("max_num_seqs"), options, env) == 64.0
    assert knob_value(V0_33.flag("uvicorn_log_level"), options, env) == 30.0
    assert knob_value(V0_33.flag("enable_log_requests"), options, env) == 1.0
    assert knob_value(V0_33.flag("log_level"), options, env) == 10.0
    # Unset: vLLM's fixed default, or unknown when it depends on the GPU.
    assert knob_value(V0_33.flag("prefill_schedule_interval"), {}, {}) == 1.0
    assert knob_value(V0_33.flag("max_num_batched_tokens"), {}, {}) is None
    assert knob_value(V0_33.flag("max_num_seqs"), {"max-num-seqs": 1.5}, {}) is None


def test_the_environment_file_is_edited_in_place() -> None:
    text = "# vLLM\nHF_HOME=/data\nVLLM_LOGGING_LEVEL=INFO\n"
    assert set_env_var(text, "VLLM_LOGGING_LEVEL", "WARNING", "main.env") == (
        "# vLLM\nHF_HOME=/data\nVLLM_LOGGING_LEVEL=WARNING\n"
    )
    assert (
        set_env_var("A=1", "VLLM_LOGGING_LEVEL", "ERROR", "e") == "A=1\nVLLM_LOGGING_LEVEL=ERROR\n"
    )
    assert read_env('; c\nexport A="x y"\nB = 2\n') == {"A": "x y", "B": "2"}
    with pytest.raises(ActuationRefused, match="several lines"):
        set_env_var("X=1\nX=2\n", "X", "3", "e")
