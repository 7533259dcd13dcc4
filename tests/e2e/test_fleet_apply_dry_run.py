"""``apply --dry-run --set`` in a fleet: run without the daemon, it still reads the fleet freeze."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.daemon import write_config
from tests.support.etcd import EtcdCluster
from tests.support.fixture_exporter import FixtureExporter, Script

pytestmark = pytest.mark.service("etcd")
PAGE = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"


def _config(directory: Path, exporter: FixtureExporter, endpoints: list[str]) -> Path:
    vllm_yaml = directory / "main.yaml"
    vllm_yaml.write_text("max-num-seqs: 64\n")
    extra = (
        f"[fleet]\nenabled = true\nendpoints = {json.dumps(endpoints)}\n"
        'prefix = "/dry/"\nhost = "host-a"\nrequest_timeout_s = 1.0\n'
        f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nconfig_path = "{vllm_yaml}"\n'
        'unit = "vllm@main.service"\n'
        "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 128\nmax_step = 32\n"
    )
    return write_config(directory, extra=extra)


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_dry_run_by_hand_sees_the_fleet_freeze_and_an_unseen_fleet(short_tmp: Path) -> None:
    apply = ("apply", "--dry-run", "--instance", "main", "--set", "max_num_seqs=96")
    with (
        EtcdCluster(short_tmp / "etcd") as etcd,
        FixtureExporter(Script(metrics=PAGE, models_status=200)) as exporter,
    ):
        config = _config(short_tmp, exporter, etcd.endpoints)
        free = _cli(config, *apply)
        assert free.returncode == 0, free.stdout + free.stderr
        assert free.stdout.startswith("main: dry run: would write ")

        frozen = _cli(config, "fleet", "freeze", "--reason", "incident 4711", "--for", "1h")
        assert frozen.returncode == 0, frozen.stderr
        held = _cli(config, *apply)
        assert held.returncode == 1
        lines = held.stdout.splitlines()
        assert lines[0] == "main: refused by 1 check; nothing would be changed"
        assert lines[1].startswith("  frozen: fleet freeze of the fleet until ")
        assert "incident 4711 (by " in lines[1]

        etcd.stop_member(0)
        unseen = _cli(config, *apply)
        assert unseen.returncode == 1
        assert "  frozen: fleet state unknown (etcd last read never: " in unseen.stdout
