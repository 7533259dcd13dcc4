from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import SpecError
from simulator.profiles import EngineProfile, load_profile
from simulator.shipped import shipped_profiles

EIGHT_B = Path(__file__).resolve().parents[3] / "simulator/profiles/llama-3.1-8b-h100-tp1.yaml"


def test_both_blis_profiles_and_the_fitted_cpu_profile_are_shipped() -> None:
    assert shipped_profiles() == [
        "llama-3.1-8b-h100-tp1",
        "llama-3.3-70b-h100-tp4",
        "tiny-llama-cpu",
    ]


def test_a_profile_loads_by_name_or_by_path(profile_8b: EngineProfile) -> None:
    assert load_profile(EIGHT_B) == profile_8b
    assert profile_8b.kv_blocks * profile_8b.block_size == 467_280
    assert (profile_8b.default_max_num_seqs, profile_8b.default_max_num_batched_tokens) == (
        1024,
        8192,
    )


def test_an_unknown_key_is_an_error_naming_file_line_and_key(tmp_path: Path) -> None:
    broken = tmp_path / "p.yaml"
    broken.write_text(EIGHT_B.read_text() + "beta4_us: 1\n")
    with pytest.raises(SpecError) as caught:
        load_profile(broken)
    (issue,) = caught.value.issues
    lines = broken.read_text().splitlines()
    assert issue.line == len(lines)
    assert issue.render().startswith(f"{broken}:{len(lines)}:1: beta4_us: unknown key")
    assert "beta3_us_per_context_token" in issue.message  # the allowed keys are listed


def test_bad_and_missing_values_are_all_reported(tmp_path: Path) -> None:
    text = EIGHT_B.read_text().replace("kv_blocks: 29205", "kv_blocks: 0")
    text = text.replace("restart_s: 60\n", "")
    broken = tmp_path / "p.yaml"
    broken.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_profile(broken)
    messages = {issue.key: issue.message for issue in caught.value.issues}
    assert messages["kv_blocks"].startswith("Input should be greater than or equal to 1")
    assert messages["restart_s"] == "required key is missing"


def test_an_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(SpecError, match=r"llama-3\.1-8b-h100-tp1, llama-3\.3-70b-h100-tp4"):
        load_profile("mistral-7b")


def test_restart_time_grows_with_the_cuda_graphs_max_num_seqs_makes_vllm_capture(
    profile_8b: EngineProfile,
) -> None:
    at_default = profile_8b.restart_downtime_s(1024, 8192)
    assert at_default == profile_8b.restart_s
    # vLLM on H100 captures batch sizes up to min(2 * max_num_seqs, 512): nothing more past 256.
    assert profile_8b.restart_downtime_s(256, 8192) == at_default
    small = profile_8b.restart_downtime_s(16, 8192)
    medium = profile_8b.restart_downtime_s(64, 8192)
    assert profile_8b.restart_s - profile_8b.cuda_graph_capture_s < small < medium < at_default
