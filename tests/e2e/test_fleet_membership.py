"""Fleet membership end to end: real governors over simulated vLLMs, registered in a real etcd.

Each governor registers its instance under its lease; ``fleet status`` shows both, with
group, version, health and knobs; a governor killed with SIGKILL stays listed until its lease
expires, then is gone; one stopped gracefully withdraws at once (its lease revoked).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import running_daemon, write_config
from tests.support.etcd import EtcdCluster
from tests.support.sim_serve import sim_serve

pytestmark = [pytest.mark.service("etcd"), pytest.mark.slow]


def fleet_config(
    directory: Path, vllm_url: str, endpoints: list[str], *, host: str, ttl_s: int, refresh_s: float
) -> Path:
    """A governor of one simulated vLLM (group ``llama``), member ``host`` of the fleet."""
    directory.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{url}"' for url in endpoints)
    extra = f"""
[fleet]
enabled = true
endpoints = [{listed}]
prefix = "/test-fleet/"
host = "{host}"
groups = {{ main = "llama" }}
lease_ttl_s = {ttl_s}
refresh_s = {refresh_s}
request_timeout_s = 2.0

[[vllm]]
name = "main"
url = "{vllm_url}"
unit = "sim.service"
config_path = "{directory / "vllm.yaml"}"
restart_command = ["true"]
scrape_interval_s = 0.3
"""
    return write_config(directory, extra=extra)


def fleet_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``vllm-governor fleet ARGS...`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "fleet", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def fleet_status(config: Path) -> dict[str, Any]:
    """``vllm-governor fleet status --json`` as a user runs it."""
    result = fleet_cli("status", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def wait_for(
    config: Path, wanted: Callable[[dict[str, Any]], bool], what: str, timeout_s: float = 60
) -> dict[str, Any]:
    """Poll ``fleet status`` until ``wanted`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = fleet_status(config)
        if wanted(answer):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s; last status {answer}")
        time.sleep(0.2)


def hosts(answer: dict[str, Any]) -> set[str]:
    return {member["host"] for member in answer["members"]}


def test_governors_register_and_a_dead_one_disappears_with_its_lease(short_tmp: Path) -> None:
    with (
        EtcdCluster(short_tmp / "etcd") as etcd,
        sim_serve(_dir(short_tmp / "a"), "max-num-seqs: 64\n") as sim_a,
        sim_serve(_dir(short_tmp / "b"), "max-num-seqs: 48\n") as sim_b,
    ):
        # a: a long lease (a graceful stop must remove it at once, not after 60 s);
        # b: a short one (killed, it must go when the lease ends, and not before: long enough
        # for one `fleet status` on a loaded machine).
        config_a = fleet_config(
            short_tmp / "a", f"http://127.0.0.1:{sim_a.port}", etcd.endpoints,
            host="host-a", ttl_s=60, refresh_s=1.0,
        )  # fmt: skip
        config_b = fleet_config(
            short_tmp / "b", f"http://127.0.0.1:{sim_b.port}", etcd.endpoints,
            host="host-b", ttl_s=8, refresh_s=1.0,
        )  # fmt: skip
        with running_daemon(config_a) as governor_a, running_daemon(config_b) as governor_b:
            governor_a.wait_for("READY=1")
            governor_b.wait_for("READY=1")

            def both_up(answer: dict[str, Any]) -> bool:
                members = answer["members"]
                return len(members) == 2 and all(
                    m["health"] == "up" and m["vllm_version"] for m in members
                )

            answer = wait_for(config_a, both_up, "both governors registered and up")
            by_host = {member["host"]: member for member in answer["members"]}
            assert by_host["host-a"]["instance"] == "main"
            assert by_host["host-a"]["group"] == "llama"
            assert by_host["host-a"]["knobs"]["max_num_seqs"] == 64
            assert by_host["host-b"]["knobs"]["max_num_seqs"] == 48
            assert by_host["host-a"]["lease"] != by_host["host-b"]["lease"]

            governor_b.process.kill()  # kill -9: nobody revokes b's lease
            governor_b.process.wait()
            assert hosts(fleet_status(config_a)) == {"host-a", "host-b"}  # its lease still runs
            wait_for(config_a, lambda answer: hosts(answer) == {"host-a"}, "b's lease expired")

            governor_a.signal(signal.SIGTERM)
            assert governor_a.process.wait(timeout=60) == 0
            assert hosts(fleet_status(config_a)) == set()  # withdrawn, 60 s lease or not
            text = governor_a.log_text()
            assert "fleet registration withdrawn" in text


def test_fleet_status_prints_a_table(short_tmp: Path) -> None:
    with (
        EtcdCluster(short_tmp / "etcd") as etcd,
        sim_serve(_dir(short_tmp / "a"), "max-num-seqs: 64\n") as sim_a,
    ):
        config = fleet_config(
            short_tmp / "a", f"http://127.0.0.1:{sim_a.port}", etcd.endpoints,
            host="host-a", ttl_s=10, refresh_s=1.0,
        )  # fmt: skip
        with running_daemon(config) as governor:
            governor.wait_for("READY=1")
            wait_for(config, lambda answer: len(answer["members"]) == 1, "registered")
            result = fleet_cli("status", "--config", str(config))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fleet /test-fleet/ on http://127.0.0.1:")
    assert "1 instance(s) on 1 host(s)" in lines[0]
    assert lines[1].split()[:5] == ["HOST", "INSTANCE", "GROUP", "VERSION", "HEALTH"]
    assert lines[2].split()[:3] == ["host-a", "main", "llama"]
    assert "max_num_seqs=64" in lines[2]
    assert lines[-2:] == ["freezes: none", "rollouts: none"]


def test_fleet_status_says_when_etcd_cannot_be_read(short_tmp: Path) -> None:
    config = fleet_config(
        short_tmp, "http://127.0.0.1:9", ["http://127.0.0.1:9"], host="h", ttl_s=10, refresh_s=1.0
    )
    result = fleet_cli("status", "--config", str(config))
    assert result.returncode == 1
    assert "the fleet cannot be read: no etcd member answered" in result.stderr


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
