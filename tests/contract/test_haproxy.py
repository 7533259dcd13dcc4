"""The HAProxy runtime client and source against a real HAProxy running the reference config,
in front of a real ``vllm-governor sim serve`` (max-num-seqs 8), under a real load."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_asyncio

from daemon.core.backoff import Backoff
from daemon.core.clock import SystemClock
from daemon.core.errors import CommandRefused, SourceUnavailable
from daemon.policy.admission.signals import AdmissionSignals
from daemon.policy.admission.slo_band import SloBand
from daemon.sources.haproxy_runtime import HaproxyRuntime, ServerRef, parse_stats_address
from daemon.sources.haproxy_source import HaproxySource
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.polling import PollingRunner
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import Freshness, SignalStore
from tests.support.completions_load import Load
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.services import free_port, require_command
from tests.support.sim_serve import SimProcess, sim_serve
from tests.support.tasks import eventually, leaked_tasks, running

pytestmark = [pytest.mark.service("haproxy"), pytest.mark.asyncio]

REF = ServerRef(BACKEND, SERVER)
INSTANCE = "main"
SERVER_LABELS = labels_of({"backend": BACKEND, "server": SERVER, "instance": INSTANCE})
BACKEND_LABELS = labels_of({"backend": BACKEND, "instance": INSTANCE})


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task running."""
    yield
    assert not await leaked_tasks()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """One simulated vLLM for the module: 8 sequences at most, ~6 ms per step."""
    with sim_serve(tmp_path_factory.mktemp("sim"), "max-num-seqs: 8\n") as server:
        yield server


@contextmanager
def gate(
    directory: Path,
    sim: SimProcess,
    *,
    maxconn: int,
    queue_timeout: str | None = "30s",
    tcp_stats_port: int | None = None,
) -> Iterator[Haproxy]:
    """HAProxy on the reference config in front of ``sim``; the shipped queue timeout if None.

    The tests that must see every request through give the queue a long timeout: on a slow
    machine the simulated steps stretch, and a request queued behind two waves could miss the
    shipped 1.5 s.
    """
    executable = require_command("haproxy")
    socket_path = directory / "haproxy.sock"
    config = render_reference_config(
        frontend_port=free_port(),
        server_port=sim.port,
        stats_socket=socket_path,
        maxconn=maxconn,
        queue_timeout=queue_timeout,
        tcp_stats_port=tcp_stats_port,
    )
    with Haproxy(executable, directory, config, socket_path) as haproxy:
        yield haproxy


def _bound_port(haproxy: Haproxy) -> int:
    for line in haproxy.config_path.read_text().splitlines():
        if line.strip().startswith("bind 127.0.0.1:"):
            return int(line.rsplit(":", 1)[1])
    message = "no bind line"
    raise AssertionError(message)


def source_of(haproxy: Haproxy) -> HaproxySource:
    return HaproxySource(haproxy.stats_socket, {REF: INSTANCE}, interval_s=0.1, timeout_s=2.0)


def values(samples: tuple[Sample, ...], labels: tuple[tuple[str, str], ...]) -> dict[str, float]:
    return {sample.key.name: sample.value for sample in samples if sample.key.labels == labels}


# -- (a) queue signals -------------------------------------------------------------------


async def test_queue_signals_under_a_load_above_the_cap_match_show_stat(
    sim: SimProcess, short_tmp: Path
) -> None:
    with gate(short_tmp, sim, maxconn=4) as haproxy:
        source = source_of(haproxy)
        # Ten clients, ~300 steps each (~1.8 s): four inside, six waiting, for a while.
        with Load(_bound_port(haproxy), clients=10, requests_per_client=1, max_tokens=300) as load:
            await eventually(
                lambda: (
                    haproxy.stat(BACKEND, "BACKEND")["qcur"] not in ("", "0")
                    and haproxy.stat(BACKEND, SERVER)["scur"] == "4"
                ),
                "a queue at the gate",
            )
            for _ in range(20):  # read while nothing moves: show stat, the source, show stat
                before = _gate_fields(haproxy)
                result = await source.poll(0.0)
                if _gate_fields(haproxy) == before:
                    break
            else:
                pytest.fail("the gate never held still long enough to compare")
            server = values(result.samples, SERVER_LABELS)
            backend = values(result.samples, BACKEND_LABELS)
            queued = int(before["server_qcur"]) + int(before["backend_qcur"])
            assert queued > 0
            assert server["haproxy_queue_current"] == queued
            assert backend["haproxy_backend_queue_current"] == int(before["backend_qcur"])
            assert server["haproxy_sessions_current"] == int(before["scur"]) == 4
            assert server["haproxy_server_maxconn"] == int(before["slim"]) == 4
            assert server["haproxy_sessions_current"] <= server["haproxy_server_maxconn"]
            assert server["haproxy_server_up"] == 1.0
            assert result.detail == ""
            # Let the rest in, so the load ends quickly.
            assert await source.runtime.set_server_maxconn(REF, 8) == 8
            outcomes = load.outcomes()
        assert [o.status for o in outcomes] == [200] * 10
        after = values((await source.poll(1.0)).samples, SERVER_LABELS)
        assert after["haproxy_queue_current"] == 0
        assert after["haproxy_http_2xx_total"] == 10
        # Every request passed the server: its sessions counter (gate_admitted_per_s's base).
        assert after["haproxy_sessions_total"] == 10
        # Requests that waited lift HAProxy's average queue time (ms -> s).
        assert 0 < after["haproxy_queue_time_seconds"] < 30
        assert after["haproxy_response_time_seconds"] > 0.5


def _gate_fields(haproxy: Haproxy) -> dict[str, str]:
    server, backend = haproxy.stat(BACKEND, SERVER), haproxy.stat(BACKEND, "BACKEND")
    return {
        "server_qcur": server["qcur"],
        "backend_qcur": backend["qcur"],
        "scur": server["scur"],
        "slim": server["slim"],
    }


# -- (b) the cap changes live under load ---------------------------------------------------


async def test_the_cap_changes_live_under_load_and_no_request_is_dropped(
    sim: SimProcess, short_tmp: Path
) -> None:
    with gate(short_tmp, sim, maxconn=2) as haproxy:
        runtime = HaproxyRuntime(haproxy.stats_socket, timeout_s=2.0)

        def sessions() -> int:
            return int(haproxy.stat(BACKEND, SERVER)["scur"])

        def queued() -> int:
            return int(haproxy.stat(BACKEND, "BACKEND")["qcur"] or 0)

        # Eight clients, four completions each of ~120 steps, every other one streamed.
        port = _bound_port(haproxy)
        with Load(port, clients=8, requests_per_client=4, max_tokens=120, stream=True) as load:
            await eventually(lambda: sessions() == 2 and queued() > 0, "the cap of 2 binding")
            assert await runtime.set_server_maxconn(REF, 6) == 6  # a raise: in at once
            await eventually(lambda: sessions() > 2, "more requests let in after the raise")
            assert await runtime.set_server_maxconn(REF, 3) == 3  # a cut: nobody is evicted
            await eventually(
                lambda: sessions() <= 3 and queued() > 0, "the cut of 3 binding", timeout_s=20
            )
            assert await runtime.server_maxconn(REF) == 3
            assert await runtime.set_server_maxconn(REF, 8) == 8
            outcomes = load.outcomes()
        assert len(outcomes) == 32
        failures = [o for o in outcomes if not o.ok or o.tokens != 120]
        assert not failures, failures
        server, backend = haproxy.stat(BACKEND, SERVER), haproxy.stat(BACKEND, "BACKEND")
        assert int(server["smax"]) <= 8
        assert int(server["hrsp_2xx"]) == 32
        for field in ("econ", "eresp", "cli_abrt", "srv_abrt", "hrsp_5xx"):
            assert int(backend[field] or 0) == 0, (field, backend[field])


# -- (c) HAProxy down: stale, then back ----------------------------------------------------


async def test_haproxy_down_makes_the_signals_stale_and_the_controller_hold(
    sim: SimProcess, short_tmp: Path
) -> None:
    clock = SystemClock()
    store, health = SignalStore(), HealthBoard()
    with gate(short_tmp, sim, maxconn=4) as haproxy:
        source = source_of(haproxy)
        backoff = Backoff(base_s=0.05, cap_s=0.2, rng=random.Random(0))
        runner = PollingRunner(source, store, health, clock, backoff)
        key = SeriesKey("haproxy_server_maxconn", SERVER_LABELS)

        def reading(name: str = "haproxy_server_maxconn") -> float | None:
            return store.reading(SeriesKey(name, SERVER_LABELS), clock.monotonic(), 1.0).value

        async with running(runner.run(lambda: None), "haproxy poller") as task:
            await eventually(lambda: reading() == 4.0, "a fresh maxconn", task=task)
            haproxy.stop()
            await eventually(
                lambda: _state(health) is SourceState.DOWN, "the source down", task=task
            )
            entry = health.get("haproxy")
            assert entry is not None
            assert entry.detail in ("refused", "absent"), entry
            await eventually(
                lambda: store.reading(key, clock.monotonic(), 1.0).freshness is Freshness.STALE,
                "the maxconn reading stale",
                task=task,
            )
            assert reading() is None
            assert reading("haproxy_queue_current") is None
            # What the fast loop sees now: no cap, no queue. It holds; nothing is written.
            controller = SloBand(min_cap=1, max_cap=8)
            signals = AdmissionSignals(
                cap=reading(),
                in_flight=reading("haproxy_sessions_current"),
                queued=reading("haproxy_queue_current"),
                ttft_p95_s=0.1,
                tpot_p95_s=0.01,
                preemptions_per_s=0.0,
            )
            step = controller.step(controller.initial_state(), signals, clock.monotonic())
            assert step.cap is None
            assert "no fresh cap" in step.reason
            haproxy.start()
            await eventually(lambda: reading() == 4.0, "fresh readings again", task=task)
            assert _state(health) is SourceState.UP


def _state(health: HealthBoard) -> SourceState | None:
    entry = health.get("haproxy")
    return entry.state if entry is not None else None


# -- the reference config's own queue timeout: a clean 503 ---------------------------------


async def test_a_request_that_waits_past_the_queue_timeout_gets_a_clean_503(
    sim: SimProcess, short_tmp: Path
) -> None:
    with gate(short_tmp, sim, maxconn=1, queue_timeout=None) as haproxy:
        # One slot, requests of ~500 steps (~3 s): the two behind the first wait 1.5 s, then 503.
        with Load(_bound_port(haproxy), clients=3, requests_per_client=1, max_tokens=500) as load:
            outcomes = load.outcomes()
        assert sorted(o.status or 0 for o in outcomes) == [200, 503, 503]
        for refused in (o for o in outcomes if o.status == 503):
            assert refused.error is None
            headers = dict(refused.headers)
            assert headers["content-type"] == "application/json"
            assert headers["retry-after"] == "1"
            assert json.loads(refused.body)["error"]["code"] == 503
        result = await source_of(haproxy).poll(0.0)
        assert values(result.samples, BACKEND_LABELS)["haproxy_backend_http_5xx_total"] == 2
        assert values(result.samples, SERVER_LABELS)["haproxy_http_5xx_total"] == 0


# -- refusals and transports ----------------------------------------------------------------


async def test_unknown_servers_bad_values_and_a_missing_socket_are_told_apart(
    sim: SimProcess, short_tmp: Path
) -> None:
    tcp_port = free_port()
    with gate(short_tmp, sim, maxconn=4, tcp_stats_port=tcp_port) as haproxy:
        runtime = HaproxyRuntime(haproxy.stats_socket, timeout_s=2.0)
        over_tcp = HaproxyRuntime(parse_stats_address(f"ipv4@127.0.0.1:{tcp_port}"), 2.0)
        assert await over_tcp.set_server_maxconn(REF, 5) == 5
        assert await runtime.set_server_maxconn(REF, 4) == 4
        with pytest.raises(CommandRefused, match="No such server") as unknown:
            await runtime.set_server_maxconn(ServerRef(BACKEND, "other"), 4)
        assert unknown.value.detail == "unknown-server"
        with pytest.raises(CommandRefused, match="No such backend"):
            await runtime.set_server_maxconn(ServerRef("elsewhere", SERVER), 4)
        with pytest.raises(CommandRefused, match="No such proxy"):
            await runtime.show_stat("elsewhere")
        with pytest.raises(ValueError, match="maxconn must be in 1"):
            await runtime.set_server_maxconn(REF, 0)  # 0 would lift the limit in HAProxy
        with pytest.raises(ValueError, match="HAProxy server name"):
            ServerRef(BACKEND, "main 4; shutdown sessions server")
        assert await runtime.server_maxconn(REF) == 4, "nothing was changed"
        lost = HaproxySource(haproxy.stats_socket, {ServerRef(BACKEND, "x"): None}, 1.0, 2.0)
        with pytest.raises(CommandRefused, match="none of the watched servers"):
            await lost.poll(0.0)
        partly = HaproxySource(
            haproxy.stats_socket, {REF: INSTANCE, ServerRef(BACKEND, "x"): None}, 1.0, 2.0
        )
        assert (await partly.poll(0.0)).detail == "some-servers-unknown"
    with pytest.raises(SourceUnavailable) as gone:
        await HaproxyRuntime(short_tmp / "nothing.sock", timeout_s=1.0).show_stat()
    assert gone.value.detail == "absent"
    with pytest.raises(SourceUnavailable) as closed:
        await HaproxyRuntime(("127.0.0.1", free_port()), timeout_s=1.0).show_stat()
    assert closed.value.detail == "refused"


async def test_a_drained_server_takes_no_new_request_and_ready_lets_them_in_again(
    sim: SimProcess, short_tmp: Path
) -> None:
    with gate(short_tmp, sim, maxconn=4) as haproxy:
        runtime = HaproxyRuntime(haproxy.stats_socket, timeout_s=2.0)
        port = _bound_port(haproxy)
        assert await runtime.set_server_state(REF, "drain") == "DRAIN"
        assert haproxy.stat(BACKEND, SERVER)["status"] == "DRAIN"
        # The only server of the backend drains: HAProxy answers at once with the gate's 503
        # (OpenAI's error shape, Retry-After), and the request never reaches vLLM.
        served_before = int(haproxy.stat(BACKEND, SERVER)["stot"])
        with Load(port, clients=1, requests_per_client=1, max_tokens=4) as refused:
            pass
        (outcome,) = refused.outcomes()
        assert outcome.status == 503, outcome
        assert json.loads(outcome.body)["error"]["type"] == "ServiceUnavailableError"
        assert dict(outcome.headers)["retry-after"] == "1"
        assert int(haproxy.stat(BACKEND, SERVER)["stot"]) == served_before
        assert await runtime.set_server_state(REF, "ready") == "UP"
        with Load(port, clients=1, requests_per_client=1, max_tokens=4) as served:
            pass
        assert [outcome.ok for outcome in served.outcomes()] == [True]
        with pytest.raises(ValueError, match="a server state is one of ready, drain, maint"):
            await runtime.set_server_state(REF, "up; shutdown sessions")
        with pytest.raises(CommandRefused, match="No such server") as unknown:
            await runtime.set_server_state(ServerRef(BACKEND, "other"), "drain")
        assert unknown.value.detail == "unknown-server"


async def test_a_runtime_api_that_never_answers_is_a_timeout(short_tmp: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the command, never answered
        await reader.read()  # until the client gives up and hangs up
        writer.close()

    path = short_tmp / "silent.sock"
    server = await asyncio.start_unix_server(silent, path=str(path))
    async with server:
        with pytest.raises(SourceUnavailable) as slow:
            await HaproxyRuntime(path, timeout_s=0.2).show_stat()
        assert slow.value.detail == "timeout"
