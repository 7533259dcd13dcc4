from __future__ import annotations

from pathlib import Path

from actuators.vllm.knob_reader import KnobReader
from daemon.api import VllmInstance


def test_knobs_come_from_the_files_and_are_read_again_only_when_they_change(tmp_path: Path) -> None:
    config = tmp_path / "vllm.yaml"
    config.write_text("max-num-seqs: 64\n")
    env = tmp_path / "vllm.env"
    server = VllmInstance(name="main", url="http://x", unit="u", config_path=config, env_file=env)
    reader = KnobReader()
    knobs = reader.read(server)
    assert knobs["max_num_seqs"] == 64.0
    assert knobs["log_level"] == 20.0  # no environment file: vLLM's default, INFO
    assert "max_num_batched_tokens" not in knobs  # depends on the GPU: unknown, never guessed
    assert reader.read(server) is knobs  # cached
    env.write_text("VLLM_LOGGING_LEVEL=ERROR\n")
    assert reader.read(server)["log_level"] == 40.0
    config.write_text("max-num-seqs: [\n")
    assert reader.read(server) == {}
    assert KnobReader().read(VllmInstance(name="obs", url="http://y")) == {}
