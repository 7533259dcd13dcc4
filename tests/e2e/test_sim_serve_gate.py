"""``sim serve --gate-socket``: its replayed load passes a gate that HAProxy's runtime API moves.

The governor's own HAProxy client (:class:`~daemon.sources.haproxy_runtime.HaproxyRuntime`)
speaks to a real ``sim serve`` process, as ``[vllm.gate]`` would.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from daemon.sources.haproxy_runtime import HaproxyRuntime, ServerRef
from daemon.sources.haproxy_stats import StatRow
from tests.e2e.test_sim_serve import MODEL, PROFILE, SimServer, until, value
from tests.support.services import free_port
from tests.support.supervised_sim import SATURATING_WORKLOAD

REF = ServerRef("vllm", "main")
MAX_NUM_SEQS = 16
CAP = 3


def _rows(runtime: HaproxyRuntime) -> tuple[StatRow, StatRow]:
    """The backend's row and the server's."""
    rows = asyncio.run(runtime.show_stat())
    backend = next(row for row in rows if row.is_backend)
    server = next(row for row in rows if not row.is_backend)
    return backend, server


def _number(row: StatRow, field: str) -> float:
    number = row.number(field)
    assert number is not None, (field, row)
    return number


def test_a_cap_set_over_the_socket_queues_and_refuses_the_replayed_load(tmp_path: Path) -> None:
    vllm_yaml = tmp_path / "vllm.yaml"
    vllm_yaml.write_text(f"served-model-name: {MODEL}\nmax-num-seqs: {MAX_NUM_SEQS}\n")
    workload = tmp_path / "workload.yaml"
    workload.write_text(SATURATING_WORKLOAD)
    socket_path = tmp_path / "gate.sock"
    summary = tmp_path / "summary.jsonl"
    port = free_port()
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve",
        "--config", str(vllm_yaml), "--profile", PROFILE, "--port", str(port),
        "--loading-s", "0.5", "--load", str(workload), "--summary", str(summary),
        "--gate-socket", str(socket_path), "--gate-queue-timeout-s", "0.5",
    ]  # fmt: skip
    log_path = tmp_path / "sim.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    sim = SimServer(process, port, log_path)
    runtime = HaproxyRuntime(socket_path, timeout_s=5.0)
    try:
        sim.wait_ready()
        until(socket_path.exists, 10, "no gate socket", sim)
        # Without --gate-state it opens at max-num-seqs.
        assert asyncio.run(runtime.server_maxconn(REF)) == MAX_NUM_SEQS
        assert asyncio.run(runtime.set_server_maxconn(REF, CAP)) == CAP

        def held_at_cap() -> bool:
            backend, server = _rows(runtime)
            # The replay saturates 16 sequences: at 3 inside, requests wait and time out.
            return (
                _number(server, "scur") == CAP
                and _number(server, "qcur") > 0
                and _number(backend, "hrsp_5xx") > 0
            )

        until(held_at_cap, 20, "the cap never held the load back", sim)
        running = value(sim.scrape(), "vllm_num_requests_running")
        assert running <= CAP, "vLLM runs more than the gate lets in"
        until(
            lambda: _number(_rows(runtime)[1], "qtime") > 0,
            20,
            "the waits at the gate never showed in qtime",
            sim,
        )

        # A raise lets the queue in at once: more than the old cap inside vLLM.
        assert asyncio.run(runtime.set_server_maxconn(REF, MAX_NUM_SEQS)) == MAX_NUM_SEQS
        until(
            lambda: value(sim.scrape(), "vllm_num_requests_running") > CAP,
            20,
            "a raised cap let nobody more in",
            sim,
        )
        # The drain the governor puts on before a restart: nothing new goes in.
        asyncio.run(runtime.set_server_state(REF, "drain"))
        assert _rows(runtime)[1].text("status") == "DRAIN"
        until(
            lambda: value(sim.scrape(), "vllm_num_requests_running") == 0,
            30,
            "a drained gate still lets requests in",
            sim,
        )
        assert asyncio.run(runtime.command("set maxconn server vllm/other 4")) == (
            "No such server.\n"
        )
        code, _ = sim.terminate(timeout_s=15)
        assert code == 0, sim.log_text()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()

    line = json.loads(summary.read_text().splitlines()[-1])
    gate = line["gate"]
    assert gate["waited"] > 0
    assert gate["refused"] > 0
    assert line["load"]["rejected"]["queue_timeout"] == gate["refused"]
    by_second = gate["by_arrival_second"]
    assert sum(row[2] for row in by_second) == gate["refused"]
    assert sum(row[1] for row in by_second) == gate["waited"]
    # The refused are rejections and SLO misses in the line's own counts.
    assert line["requests"]["rejected"] >= gate["refused"]


def _serve(tmp_path: Path, name: str, *extra: str) -> SimServer:
    """A gated ``sim serve`` at max-num-seqs 16, without load, ready and answering its socket."""
    vllm_yaml = tmp_path / "vllm.yaml"
    vllm_yaml.write_text(f"served-model-name: {MODEL}\nmax-num-seqs: {MAX_NUM_SEQS}\n")
    workload = tmp_path / "workload.yaml"
    workload.write_text(SATURATING_WORKLOAD)
    port = free_port()
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve",
        "--config", str(vllm_yaml), "--profile", PROFILE, "--port", str(port),
        "--loading-s", "0.5", "--load", str(workload),
        "--gate-socket", str(tmp_path / "gate.sock"), *extra,
    ]  # fmt: skip
    log_path = tmp_path / f"{name}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    sim = SimServer(process, port, log_path)
    sim.wait_ready()
    until((tmp_path / "gate.sock").exists, 10, "no gate socket", sim)
    return sim


def test_with_gate_state_the_next_process_opens_at_the_cap_the_last_one_kept(
    tmp_path: Path,
) -> None:
    state = tmp_path / "gate-cap"
    runtime = HaproxyRuntime(tmp_path / "gate.sock", timeout_s=5.0)
    first = _serve(tmp_path, "first", "--gate-state", str(state))
    try:
        assert asyncio.run(runtime.server_maxconn(REF)) == MAX_NUM_SEQS  # nothing kept yet
        assert asyncio.run(runtime.set_server_maxconn(REF, CAP)) == CAP
        assert first.terminate(timeout_s=15)[0] == 0, first.log_text()
    finally:
        first.process.kill()
    # A restart, as the governor's: HAProxy would still hold the cap it was given.
    second = _serve(tmp_path, "second", "--gate-state", str(state))
    try:
        assert asyncio.run(runtime.server_maxconn(REF)) == CAP
        assert second.terminate(timeout_s=15)[0] == 0, second.log_text()
    finally:
        second.process.kill()
    # A kept cap that is not a positive whole number is none: open at max-num-seqs.
    state.write_text("0\n")
    third = _serve(tmp_path, "third", "--gate-state", str(state))
    try:
        assert asyncio.run(runtime.server_maxconn(REF)) == MAX_NUM_SEQS
    finally:
        third.process.kill()
        third.process.wait()
