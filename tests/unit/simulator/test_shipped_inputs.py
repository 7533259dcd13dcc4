"""Inputs by shipped name, and errors that survive the trip back from a worker process."""

from __future__ import annotations

import pickle
from pathlib import Path

from simulator.errors import SpecError, SpecIssue
from simulator.profiles import load_profile
from simulator.shipped import TRACE_DIR, WORKLOAD_DIR, shipped_input
from simulator.vllm_config import load_vllm_config

ROOT = Path(__file__).resolve().parents[3]


def test_a_shipped_name_finds_its_workload_or_trace_and_a_path_wins() -> None:
    assert shipped_input("burst-and-long-outputs") == WORKLOAD_DIR / "burst-and-long-outputs.yaml"
    assert shipped_input("azure-llm-2023-conv") == TRACE_DIR / "azure-llm-2023-conv.csv"
    path = WORKLOAD_DIR / "proof-four-phases.yaml"
    assert shipped_input(path) == path


def test_an_unknown_name_comes_back_as_asked_so_the_error_names_it() -> None:
    assert shipped_input("no-such-workload") == Path("no-such-workload")


def test_a_spec_error_pickles_with_its_issues() -> None:
    # `simulate --jobs N` runs in worker processes; an error raised there is pickled back to
    # the parent. Rebuilt from its message, it crashed the pool's result thread and hung.
    error = SpecError([SpecIssue(Path("w.yaml"), 3, 5, "arrivals.rate_rps", "must be > 0")])
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, SpecError)
    assert again.issues == error.issues
    assert str(again) == "w.yaml:3:5: arrivals.rate_rps: must be > 0"


def test_the_example_vllm_config_the_readme_runs_is_read_as_written() -> None:
    # README.md and simulator/README.md run `sim run --config examples/vllm/config.yaml`.
    profile = load_profile("llama-3.1-8b-h100-tp1")
    settings = load_vllm_config(ROOT / "examples/vllm/config.yaml", profile)
    assert (settings.max_num_seqs, settings.max_num_batched_tokens) == (256, 8192)
    assert settings.shutdown_timeout == 30
