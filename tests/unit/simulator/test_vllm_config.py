from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simulator.errors import SpecError
from simulator.profiles import EngineProfile
from simulator.settings import EngineSettings, SchedulingPolicy, SettingsError
from simulator.vllm_config import load_vllm_config, settings_from_options


def _load(tmp_path: Path, text: str, profile: EngineProfile) -> EngineSettings:
    path = tmp_path / "vllm.yaml"
    path.write_text(text)
    return load_vllm_config(path, profile)


def test_an_empty_config_gives_the_h100_defaults(profile_8b: EngineProfile) -> None:
    settings = settings_from_options({}, profile_8b)
    assert (settings.max_num_seqs, settings.max_num_batched_tokens) == (1024, 8192)
    assert settings.watermark == 0.0
    assert settings.prefill_schedule_interval == 1
    assert settings.enable_chunked_prefill is True
    assert settings.num_gpu_blocks == 29205
    assert settings.served_model_name == profile_8b.model


def test_dashes_and_underscores_are_the_same_option_as_in_vllm(
    tmp_path: Path, profile_8b: EngineProfile
) -> None:
    text = (
        "model: meta-llama/Llama-3.1-8B-Instruct\n"
        "port: 8001\n"
        "max-num-seqs: 256\n"
        "max_num_batched_tokens: 4096\n"
        "max-num-active-seqs: 128\n"
        "prefill_schedule_interval: 4\n"
        "long-prefill-token-threshold: 512\n"
        "watermark: 0.05\n"
        "shutdown-timeout: 30\n"
        "disable-log-stats: true\n"
        "enable-log-requests: false\n"
        "compilation-config: {level: 3}\n"
    )
    settings = _load(tmp_path, text, profile_8b)
    assert settings.max_num_seqs == 256
    assert settings.max_num_batched_tokens == 4096
    assert settings.max_num_active_seqs == 128
    assert settings.admission_cap == 128
    assert settings.prefill_schedule_interval == 4
    assert settings.long_prefill_token_threshold == 512
    assert settings.watermark == 0.05
    assert settings.shutdown_timeout == 30
    assert settings.disable_log_stats is True
    assert dict(settings.ignored)["port"] == "8001"
    assert "compilation-config" in dict(settings.ignored)


def test_removed_and_unknown_options_are_unrecognized_arguments(
    tmp_path: Path, profile_8b: EngineProfile
) -> None:
    text = "max-num-seqs: 64\nmax-num-partial-prefills: 2\nscheduler_delay_factor: 0.5\nfoo: 1\n"
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, text, profile_8b)
    rendered = [issue.render() for issue in caught.value.issues]
    assert len(rendered) == 3
    assert rendered[0].endswith(
        ":2:1: max-num-partial-prefills: unrecognized arguments: --max-num-partial-prefills "
        "(removed from vLLM (PR #49244))"
    )
    assert "--scheduler-delay-factor (exists only in the V0 engine" in rendered[1]
    assert ":4:1: foo: unrecognized arguments: --foo" in rendered[2]


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("max-num-seqs: 1.5\n", "max-num-seqs", "invalid int value: '1.5'"),
        ("max-num-seqs: many\n", "max-num-seqs", "invalid int value: 'many'"),
        ("watermark: high\n", "watermark", "invalid float value: 'high'"),
        ("watermark: 1.0\n", "watermark", "must be in [0.0, 1.0)"),
        ("disable-log-stats: 1\n", "disable-log-stats", "expects true or false"),
        (
            "max-num-seqs: 2048\nmax-num-batched-tokens: 1024\n",
            "max-num-batched-tokens",
            "(1024) must be greater than or equal to max_num_seqs (2048)",
        ),
        (
            "max-num-seqs: 64\nmax-num-active-seqs: 128\n",
            "max-num-active-seqs",
            "(128) cannot be greater than max_num_seqs (64)",
        ),
        ("prefill-schedule-interval: 0\n", "prefill-schedule-interval", "must be at least 1"),
        (
            "max-num-seqs: 8\nmax_num_seqs: 16\n",
            "max_num_seqs",
            "given twice (also as 'max-num-seqs')",
        ),
        ("performance-mode: fast\n", "performance-mode", "must be one of balanced"),
    ],
)
def test_bad_values_are_located_at_their_key(
    tmp_path: Path, profile_8b: EngineProfile, text: str, key: str, message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, text, profile_8b)
    (issue,) = caught.value.issues
    assert issue.key == key
    assert message in issue.message
    lines = text.splitlines()
    assert lines[issue.line - 1].startswith(f"{key}:")


def test_throughput_mode_doubles_the_defaults_it_does_not_override(
    profile_8b: EngineProfile,
) -> None:
    settings = settings_from_options(
        {"performance-mode": "throughput", "max-num-seqs": 512}, profile_8b
    )
    assert (settings.max_num_seqs, settings.max_num_batched_tokens) == (512, 16384)


def test_another_block_size_cuts_the_same_kv_memory_differently(
    profile_8b: EngineProfile,
) -> None:
    settings = settings_from_options({"block-size": 32}, profile_8b)
    assert settings.num_gpu_blocks * 32 == pytest.approx(29205 * 16, abs=32)
    overridden = settings_from_options({"num-gpu-blocks-override": 1000}, profile_8b)
    assert overridden.num_gpu_blocks == 1000


def test_settings_changed_in_code_are_checked_like_a_file(profile_8b: EngineProfile) -> None:
    settings = EngineSettings.defaults(profile_8b)
    with pytest.raises(SettingsError, match="max_num_active_seqs"):
        dataclasses.replace(settings, max_num_seqs=64, max_num_active_seqs=128)


def test_the_scheduling_policy_is_read_from_the_config_as_vllm_reads_it(
    tmp_path: Path, profile_8b: EngineProfile
) -> None:
    assert settings_from_options({}, profile_8b).scheduling_policy == SchedulingPolicy.FCFS
    for spelling in ("scheduling-policy", "scheduling_policy"):
        settings = _load(tmp_path, f"{spelling}: priority\n", profile_8b)
        assert settings.scheduling_policy is SchedulingPolicy.PRIORITY
    with pytest.raises(SpecError) as caught:
        _load(tmp_path, "max-num-seqs: 8\nscheduling-policy: lifo\n", profile_8b)
    (issue,) = caught.value.issues
    assert (issue.line, issue.key) == (2, "scheduling-policy")
    assert "invalid choice: 'lifo'" in issue.message
