"""``vllm-governor sim serve`` as a real process, seen from where the governor stands."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.core.errors import MetricsParseError
from daemon.sources.vllm_metrics import VllmScrape, parse_vllm_metrics
from tests.support.services import free_port
from tests.support.supervised_sim import SATURATING_WORKLOAD

PROFILE = "llama-3.1-8b-h100-tp1"
MODEL = "sim/test-model"
FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics" / "v0.33-synthesized.txt"
)

# Canonical signals the simulator exposes and the synthesized 0.33 fixture lacks, and why.
SIM_ONLY = {
    **dict.fromkeys(
        [
            f"vllm_{name}_seconds{suffix}"
            for name in ("prefill", "decode")
            for suffix in ("_bucket", "_count", "_sum")
        ],
        "histograms vLLM 0.33 registers (v1/metrics/loggers.py); the synthesized page omits them",
    ),
    "vllm_admission_rejections_total": "the counter of 0.33's max-num-queued-* admission limits "
    "(docs/sources.md#metrics); the synthesized page omits it",
    **dict.fromkeys(
        [
            f"vllm_{name}{suffix}"
            for name in ("request_prompt_tokens", "request_generation_tokens", "iteration_tokens")
            for suffix in ("_bucket", "_count", "_sum")
        ],
        "histograms vLLM registers and a real 0.32 page shows (real-0.32-cpu/preempting.txt); "
        "the synthesized page omits them",
    ),
}
# Canonical signals of the fixture the simulator lacks, and why: none.
FIXTURE_ONLY: dict[str, str] = {}


@dataclass
class SimServer:
    """A started ``sim serve`` process."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Status, content type and body of a GET."""
        request = urllib.request.Request(self.url(path), headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read().decode()
                return response.status, response.headers.get("Content-Type", ""), body
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer of a non-streaming completion."""
        try:
            with urllib.request.urlopen(_post(self.url("/v1/completions"), body), timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    @contextmanager
    def stream(self, body: dict[str, Any]) -> Iterator[Iterator[dict[str, Any] | str]]:
        """The SSE events of a streaming completion: chunks as dicts, then "[DONE]"."""
        request = _post(self.url("/v1/completions"), {**body, "stream": True})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")

            def events() -> Iterator[dict[str, Any] | str]:
                for raw in response:
                    line = raw.decode().strip()
                    if not line:
                        continue
                    assert line.startswith("data: "), line
                    data = line.removeprefix("data: ")
                    yield data if data == "[DONE]" else json.loads(data)

            yield events()

    def scrape(self) -> VllmScrape:
        status, _, text = self.get("/metrics")
        assert status == 200
        return parse_vllm_metrics(text, instance="sim", at=0.0, source="vllm/sim")

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        until(lambda: self.health() == 200, timeout_s, "the server never became ready", self)

    def health(self) -> int | None:
        """/health's status, or None while the port refuses connections."""
        try:
            return self.get("/health")[0]
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError):
                return None
            raise
        except ConnectionRefusedError:
            return None

    def terminate(self, timeout_s: float) -> tuple[int, float]:
        """SIGTERM; the exit status and the seconds it took."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout_s)
        return code, time.monotonic() - started


def _post(url: str, body: dict[str, Any]) -> urllib.request.Request:
    return urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )


def until(condition: Callable[[], bool], timeout_s: float, message: str, server: SimServer) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if server.process.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail(f"{message}; exit={server.process.poll()}; log:\n{server.log_text()}")


@contextmanager
def sim_server(
    directory: Path,
    config: str,
    *,
    loading_s: float = 0.5,
    load: str | None = None,
    ready: bool = True,
) -> Iterator[SimServer]:
    """Start ``sim serve`` on a free port; kill it on the way out."""
    vllm_config = directory / "vllm.yaml"
    vllm_config.write_text(f"served-model-name: {MODEL}\n{config}", encoding="utf-8")
    port = free_port()
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve",
        "--config", str(vllm_config), "--profile", PROFILE,
        "--port", str(port), "--loading-s", str(loading_s),
    ]  # fmt: skip
    if load is not None:
        workload = directory / "workload.yaml"
        workload.write_text(load, encoding="utf-8")
        command += ["--load", str(workload)]
    log_path = directory / f"sim-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    server = SimServer(process, port, log_path)
    try:
        if ready:
            server.wait_ready()
        yield server
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def value(scrape: VllmScrape, name: str, **labels: str) -> float:
    """The one canonical sample ``name`` with ``labels`` (besides instance, engine, model)."""
    found = [
        sample.value
        for sample in scrape.samples
        if sample.key.name == name
        # A single-engine server's series are stored as the server's, without the label.
        and dict(sample.key.labels).get("engine", "0") == "0"
        and all(dict(sample.key.labels).get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimServer]:
    """One idle server for the API tests (max-num-seqs 8)."""
    with sim_server(tmp_path_factory.mktemp("sim"), "max-num-seqs: 8\n") as started:
        yield started


# -- lifecycle ---------------------------------------------------------------------------


def test_port_refuses_connections_while_loading_then_serves(tmp_path: Path) -> None:
    # disable-log-stats rides along: it must remove every vllm:* metric, as in real vLLM.
    with sim_server(tmp_path, "disable-log-stats: true\n", loading_s=2.0, ready=False) as sim:
        until(lambda: "loading" in sim.log_text(), 20, "no loading line", sim)
        loading_seen = time.monotonic()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", sim.port), timeout=1).close()
        sim.wait_ready()
        assert time.monotonic() - loading_seen >= 1.5, "ready before the loading time"
        assert sim.get("/ping")[0] == 200
        assert json.loads(sim.get("/version")[2]) == {"version": "0.33.0"}
        models = json.loads(sim.get("/v1/models")[2])
        assert models["object"] == "list"
        assert [m["id"] for m in models["data"]] == [MODEL]
        status, _, text = sim.get("/metrics")
        assert status == 200
        assert "process_cpu_seconds_total" in text
        assert "vllm:" not in text
        with pytest.raises(MetricsParseError, match="no vllm"):
            parse_vllm_metrics(text, instance="sim", at=0.0, source="vllm/sim")


def test_sigterm_with_shutdown_timeout_0_aborts_in_flight_requests(tmp_path: Path) -> None:
    with sim_server(tmp_path, "max-num-seqs: 8\n") as sim:
        # ~3000 steps of ~6 ms: far longer than the test waits.
        with sim.stream({"prompt": "a b c", "max_tokens": 3000}) as events:
            first = next(events)
            assert isinstance(first, dict)
            code, took = sim.terminate(timeout_s=10)
            rest = list(events)
        assert code == 0, sim.log_text()
        assert took < 3.0
        last_chunk = rest[-2]
        assert isinstance(last_chunk, dict)
        assert last_chunk["choices"][0]["finish_reason"] == "abort"
        assert rest[-1] == "[DONE]"
        assert "0 completed, 1 aborted" in sim.log_text()


def test_sigterm_with_shutdown_timeout_drains_and_refuses_new_requests(tmp_path: Path) -> None:
    with sim_server(tmp_path, "max-num-seqs: 8\nshutdown-timeout: 20\n") as sim:
        # ~600 steps of ~6 ms: the drain takes a few seconds, far less than its timeout.
        with sim.stream({"prompt": [1, 2, 3], "max_tokens": 600}) as events:
            assert isinstance(next(events), dict)
            sim.process.send_signal(signal.SIGTERM)
            until(
                lambda: sim.complete({"prompt": "x", "max_tokens": 2})[0] == 500,
                10,
                "new requests are not refused while draining",
                sim,
            )
            status, body = sim.complete({"prompt": "x", "max_tokens": 2})
            # As vLLM 0.32 answers during a drain: 500, not 503, and /health stays 200.
            assert status == 500
            assert body["error"]["code"] == 500
            assert "cannot schedule new futures after shutdown" in body["error"]["message"]
            assert sim.health() == 200, "the engine is alive while it drains"
            rest = list(events)
        chunks = [event for event in rest if isinstance(event, dict)]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        assert rest[-1] == "[DONE]"
        assert sim.process.wait(timeout=10) == 0, sim.log_text()
        assert re.search(r"\d+ completed, 0 aborted", sim.log_text()), sim.log_text()


def test_under_load_then_restarted_with_a_smaller_max_num_seqs(tmp_path: Path) -> None:
    def running_peak(sim: SimServer, cap: int) -> tuple[float, VllmScrape]:
        """Scrape while the load saturates the engine; the peak of running, the last scrape."""
        peak = 0.0
        until(
            lambda: value(sim.scrape(), "vllm_num_requests_running") == cap,
            20,
            f"running never reached {cap}",
            sim,
        )
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            scrape = sim.scrape()
            peak = max(peak, value(scrape, "vllm_num_requests_running"))
            time.sleep(0.05)
        return peak, scrape

    with sim_server(tmp_path, "max-num-seqs: 12\n", load=SATURATING_WORKLOAD) as sim:
        peak, first = running_peak(sim, 12)
        assert peak == 12
        assert value(first, "vllm_num_requests_waiting") > 0
        counters = ("vllm_generation_tokens_total", "vllm_prompt_tokens_total")
        assert all(value(first, counter) > 0 for counter in counters)

        def grown() -> bool:
            scrape = sim.scrape()
            return value(scrape, "vllm_e2e_seconds_count") >= 5 and all(
                value(scrape, counter) > value(first, counter) for counter in counters
            )

        until(grown, 20, "the counters did not grow under load", sim)
        later = sim.scrape()
        assert value(later, "vllm_request_success_total", finished_reason="stop") >= 5
        for histogram in ("vllm_ttft_seconds", "vllm_itl_seconds", "vllm_queue_seconds"):
            assert value(later, f"{histogram}_count") > 0
        assert value(later, "vllm_kv_cache_usage_ratio") > 0
        code, took = sim.terminate(timeout_s=10)
        assert code == 0
        assert took < 3.0
        aborted = re.search(r"(\d+) aborted", sim.log_text())
        assert aborted is not None
        assert int(aborted.group(1)) > 0, "in-flight load requests are aborted on SIGTERM"

    # A restart re-reads the YAML: the process starts again with a smaller cap.
    with sim_server(tmp_path, "max-num-seqs: 4\n", load=SATURATING_WORKLOAD) as sim:
        peak, scrape = running_peak(sim, 4)
        assert peak == 4
        assert value(scrape, "vllm_num_requests_waiting") > 0


# -- API ---------------------------------------------------------------------------------


def test_completion_answers_at_the_end_with_usage(server: SimServer) -> None:
    status, answer = server.complete(
        {"model": MODEL, "prompt": "one two three four", "max_tokens": 7}
    )
    assert status == 200
    assert answer["object"] == "text_completion"
    assert answer["model"] == MODEL
    assert answer["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 7,
        "total_tokens": 11,
        "prompt_tokens_details": None,
    }
    [choice] = answer["choices"]
    assert len(choice["text"].split()) == 7
    assert choice["finish_reason"] == "length"


def test_completion_streams_tokens_as_they_are_generated(server: SimServer) -> None:
    body = {"prompt": [5, 6, 7], "max_tokens": 20, "stream_options": {"include_usage": True}}
    with server.stream(body) as events:
        received = list(events)
    assert received[-1] == "[DONE]"
    chunks = [event for event in received if isinstance(event, dict)]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["prompt_tokens"] == 3
    assert usage["usage"]["completion_tokens"] == 20
    text_chunks = chunks[:-1]
    assert len(text_chunks) > 1, "tokens come out step by step, not in one piece"
    assert len({chunk["id"] for chunk in chunks}) == 1
    text = "".join(chunk["choices"][0]["text"] for chunk in text_chunks)
    assert len(text.split()) == 20
    assert [c["choices"][0]["finish_reason"] for c in text_chunks][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in text_chunks[:-1])


def test_a_client_that_hangs_up_aborts_its_request(server: SimServer) -> None:
    def aborted() -> float:
        return value(server.scrape(), "vllm_request_success_total", finished_reason="abort")

    before = aborted()
    body = json.dumps({"prompt": "a b", "max_tokens": 3000}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as client:
        client.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        until(
            lambda: value(server.scrape(), "vllm_num_requests_running") == 1,
            10,
            "the request never ran",
            server,
        )
    until(lambda: aborted() == before + 1, 10, "hanging up did not abort the request", server)
    assert value(server.scrape(), "vllm_num_requests_running") == 0


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "other", "prompt": "x"}, 404, "model"),
        ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ({"prompt": "   "}, 400, "prompt"),
        ({"prompt": ["a", "b"]}, 400, "prompt"),
        ({"max_tokens": 3}, 400, "prompt"),
        ({"prompt": "x", "priority": "high"}, 400, "priority"),
        ({"prompt": "x", "priority": 1.5}, 400, "priority"),
        ({"prompt": "x", "priority": 2**63}, 400, "priority"),
    ],
)
def test_bad_completion_requests_get_vllm_errors(
    server: SimServer, body: dict[str, Any], status: int, param: str
) -> None:
    code, answer = server.complete(body)
    assert code == status
    assert answer["error"]["code"] == status
    assert answer["error"]["param"] == param


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("priority", ["first", "online", "batch"]), ("fcfs", ["first", "batch", "online"])],
)
def test_a_request_s_priority_orders_the_queue_only_under_the_priority_policy(
    tmp_path: Path, policy: str, expected: list[str]
) -> None:
    # One request runs at a time. While the first one runs, a batch request (priority 10)
    # and then an online one (priority 0, the default) queue behind it. Under priority the
    # online one overtakes; under fcfs the priority is accepted and changes nothing.
    config = f"max-num-seqs: 1\nmax-num-batched-tokens: 2048\nscheduling-policy: {policy}\n"
    with sim_server(tmp_path, config) as sim:
        finished: list[str] = []
        statuses: list[int] = []

        def send(name: str, body: dict[str, Any]) -> threading.Thread:
            def complete() -> None:
                statuses.append(sim.complete(body)[0])
                finished.append(name)

            thread = threading.Thread(target=complete, name=f"client {name}")
            thread.start()
            return thread

        def gauge(name: str) -> float:
            return value(sim.scrape(), name)

        # The gauges appear with the first request the engine has seen.
        assert sim.complete({"prompt": "warm up", "max_tokens": 1})[0] == 200
        threads = [send("first", {"prompt": "a", "max_tokens": 300})]
        until(lambda: gauge("vllm_num_requests_running") == 1, 10, "nothing ran", sim)
        # 40 tokens each: their answers come back 40 engine steps apart, longer than a loaded
        # machine delays a client thread; at 4 a CI run read both back before the first one.
        threads.append(send("batch", {"prompt": "b", "max_tokens": 40, "priority": 10}))
        until(lambda: gauge("vllm_num_requests_waiting") == 1, 10, "batch never queued", sim)
        threads.append(send("online", {"prompt": "c", "max_tokens": 40}))
        until(lambda: gauge("vllm_num_requests_waiting") == 2, 10, "online never queued", sim)
        assert gauge("vllm_num_requests_running") == 1, "the first request ended too soon"
        for thread in threads:
            thread.join(timeout=30)
        assert statuses == [200, 200, 200]
        assert finished == expected
    assert f"'scheduling_policy': '{policy}'" in sim.log_text()


def test_metrics_yield_the_canonical_signals_of_a_real_0_33_page(server: SimServer) -> None:
    assert server.complete({"prompt": "warm up", "max_tokens": 3})[0] == 200
    status, content_type, text = server.get("/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    fixture_text = FIXTURE.read_text()
    sim = parse_vllm_metrics(text, instance="sim", at=0.0, source="vllm/sim")
    real = parse_vllm_metrics(fixture_text, instance="sim", at=0.0, source="vllm/sim")
    sim_names = {sample.key.name for sample in sim.samples}
    real_names = {sample.key.name for sample in real.samples}
    assert sim_names - real_names == set(SIM_ONLY)
    assert real_names - sim_names == set(FIXTURE_ONLY)
    assert sim.engines == ("0",)
    assert not sim.unknown_families
    assert not sim.deprecated_families
    # Same HELP and TYPE lines, hence the same families, types and help texts...
    fixture_headers = {line for line in fixture_text.splitlines() if line.startswith("# ")}
    assert fixture_headers <= set(text.splitlines())
    # ...and the same label names and bucket bounds, series by series.
    assert _label_shapes(fixture_text) <= _label_shapes(text)
    assert value(sim, "vllm_num_gpu_blocks") == 29205


def test_metrics_stay_in_the_text_format_whatever_the_accept_header(server: SimServer) -> None:
    openmetrics = {"Accept": "application/openmetrics-text; version=1.0.0"}
    _, content_type, text = server.get("/metrics", headers=openmetrics)
    assert content_type.startswith("text/plain; version=0.0.4")
    assert "vllm:num_requests_running{" in text


def _label_shapes(text: str) -> set[tuple[str, tuple[str, ...]]]:
    """(sample name, label names and any le bound) of every vllm:* series, values dropped."""
    shapes = set()
    for line in text.splitlines():
        match = re.match(r"(vllm:[^{ ]+)\{([^}]*)\}", line)
        if match is None:
            continue
        labels = []
        for pair in match.group(2).split(","):
            name, _, quoted = pair.partition("=")
            kept = name in ("le", "reason", "finished_reason", "engine")
            labels.append(f"{name}={quoted}" if kept else name)
        shapes.add((match.group(1), tuple(sorted(labels))))
    return shapes
