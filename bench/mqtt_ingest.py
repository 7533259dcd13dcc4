"""MQTT ingest through the signal store, next to a bare aiomqtt receive loop, in one run.

A real Mosquitto on loopback; one publisher *process* (paho, QoS 0) sends N JSON messages
``{"v": x}`` round-robin over HOSTS x GPUS topics ``bench/h<i>/g<j>/value``. Two receivers take
turns on the same traffic:

- mapped: the governor's ``MqttSource`` (topic filter ``bench/+/+/value``, labels from topic
  segments, JSON field ``v``) into a ``SignalStore`` with a small cap, so that more series
  arrive than it may hold: memory must stay within the cap, the rest counted as dropped;
- raw: a bare ``async for message in client.messages`` loop that only counts.

The clock starts when the publisher, already connected, is told to go, and stops at the last
message taken off the connection. Each receiver runs ``--rounds`` times, alternately; the best
round of each is reported, with the ratio; so is the cost of mapping alone (``ingest`` called
in a plain loop, no network). Resident memory is read before, after each mapped round (the
store's series and points must stay within its cap) and at the end.

    .venv/bin/python -m bench.mqtt_ingest [--messages 150000] [--max-series 1000] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import aiomqtt
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from daemon.core.backoff import Backoff
from daemon.core.clock import SystemClock
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.mqtt import MqttBroker, MqttSource, Subscription
from daemon.sources.store import SignalStore
from tests.support.mosquitto import Mosquitto

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
IDLE_LIMIT_S = 3.0
SUBSCRIPTION = Subscription(
    "bench/+/+/value", "bench_value", field="v", labels={"host": 1, "gpu": 2}
)


def rss_mib() -> float:
    """Resident memory of this process in MiB."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * PAGE_KIB / 1024


@dataclass
class Round:
    """One receiver's run over the whole stream."""

    receiver: str
    received: int
    seconds: float
    publisher_seconds: float

    @property
    def per_second(self) -> float:
        """Messages taken off the connection per second."""
        return self.received / self.seconds if self.seconds else 0.0


def publish(host: str, port: int, messages: int, hosts: int, gpus: int) -> None:
    """The publisher process: connect, wait for "go" on stdin, send, report its own time."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-publisher")
    client.max_queued_messages_set(0)
    client.connect(host, port)
    client.loop_start()
    topics = [f"bench/h{h}/g{g}/value" for h in range(hosts) for g in range(gpus)]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    started = time.perf_counter()
    info = None
    for n in range(messages):
        info = client.publish(topics[n % len(topics)], b'{"v": %d.5}' % n, qos=0)
    if info is not None:
        info.wait_for_publish(timeout=120)
    sys.stdout.write(f"{time.perf_counter() - started}\n")
    sys.stdout.flush()
    client.disconnect()
    client.loop_stop()


async def _stream(
    broker: Mosquitto, args: argparse.Namespace, progress: Callable[[], int]
) -> tuple[float, float]:
    """Run the publisher; return (seconds to the last received message, publisher's seconds)."""
    command = [
        sys.executable,
        "-m",
        "bench.mqtt_ingest",
        "--publish",
        broker.host,
        str(broker.port),
    ]
    command += [str(args.messages), str(args.hosts), str(args.gpus)]
    publisher = await asyncio.create_subprocess_exec(
        *command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert publisher.stdin is not None
    assert publisher.stdout is not None
    try:
        assert (await publisher.stdout.readline()).strip() == b"ready"
        started = last_change = time.perf_counter()
        publisher.stdin.write(b"go\n")
        await publisher.stdin.drain()
        seen = progress()
        while seen < args.messages and time.perf_counter() - last_change < IDLE_LIMIT_S:
            await asyncio.sleep(0.002)
            if progress() != seen:
                seen, last_change = progress(), time.perf_counter()
        publisher_seconds = float(await publisher.stdout.readline())
        return last_change - started, publisher_seconds
    finally:
        with contextlib.suppress(ProcessLookupError):
            publisher.kill()
        await publisher.wait()


async def raw_round(broker: Mosquitto, args: argparse.Namespace) -> Round:
    """The bare aiomqtt loop: count messages, nothing else."""
    count = 0

    async def receive(client: aiomqtt.Client) -> None:
        nonlocal count
        async for _message in client.messages:
            count += 1

    async with aiomqtt.Client(broker.host, broker.port, identifier="bench-raw") as client:
        await client.subscribe("bench/+/+/value")
        task = asyncio.create_task(receive(client), name="raw receive loop")
        try:
            seconds, publisher_seconds = await _stream(broker, args, lambda: count)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return Round("raw aiomqtt loop", count, seconds, publisher_seconds)


async def mapped_round(
    broker: Mosquitto, args: argparse.Namespace, store: SignalStore
) -> tuple[Round, MqttSource]:
    """The governor's source, mapping into ``store``."""
    settings = MqttBroker(broker.host, broker.port, client_id="bench-governor")
    source = MqttSource(settings, [SUBSCRIPTION], backoff=Backoff(base_s=0.05, cap_s=0.2))
    health = HealthBoard()
    started = asyncio.Event()
    task = asyncio.create_task(
        source.run(store, health, SystemClock(), started.set), name="mqtt source"
    )
    try:
        await started.wait()
        entry = health.get("mqtt")
        assert entry is not None
        assert entry.state is SourceState.UP, entry.last_error
        seconds, publisher_seconds = await _stream(broker, args, lambda: source.stats.received)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return Round(
        "MqttSource -> SignalStore", source.stats.received, seconds, publisher_seconds
    ), source


def mapping_only(args: argparse.Namespace) -> float:
    """Messages per second through ``MqttSource.ingest`` alone: no broker, no socket, no loop."""
    source = MqttSource(MqttBroker("unused"), [SUBSCRIPTION])
    store = SignalStore(points_per_series=args.points, max_series=args.max_series)
    topics = [f"bench/h{h}/g{g}/value" for h in range(args.hosts) for g in range(args.gpus)]
    messages: int = args.messages
    payloads = [b'{"v": %d.5}' % n for n in range(messages)]
    started = time.perf_counter()
    for n, payload in enumerate(payloads):
        source.ingest(topics[n % len(topics)], payload, float(n), store)
    return messages / (time.perf_counter() - started)


async def measure(args: argparse.Namespace) -> dict[str, object]:
    """Alternate the two receivers over the same traffic; keep the best round of each."""
    executable = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin")
    if executable is None:
        sys.exit("mosquitto is not installed")
    with (
        tempfile.TemporaryDirectory(prefix="vg-bench-") as scratch,
        Mosquitto(
            executable,
            Path(scratch),
            # Mosquitto drops messages for a subscriber more than 1000 behind; the bench must
            # measure the receivers, so the broker may queue without limit here.
            extra_config=["max_queued_messages 0"],
        ) as broker,
    ):
        rss_before = rss_mib()
        store = SignalStore(points_per_series=args.points, max_series=args.max_series)
        mapped: list[Round] = []
        raw: list[Round] = []
        source = None
        rss_after_first_mapped = 0.0
        for _ in range(args.rounds):
            round_, source = await mapped_round(broker, args, store)
            mapped.append(round_)
            rss_after_first_mapped = rss_after_first_mapped or rss_mib()
            raw.append(await raw_round(broker, args))
        rss_after = rss_mib()
    assert source is not None
    best_mapped = max(mapped, key=lambda r: r.per_second)
    best_raw = max(raw, key=lambda r: r.per_second)
    return {
        "messages_per_round": args.messages,
        "distinct_topics": args.hosts * args.gpus,
        "mapped": {**asdict(best_mapped), "per_second": round(best_mapped.per_second)},
        "raw": {**asdict(best_raw), "per_second": round(best_raw.per_second)},
        "all_rounds_per_second": {
            "mapped": [round(r.per_second) for r in mapped],
            "raw": [round(r.per_second) for r in raw],
        },
        "mapped_over_raw": round(best_mapped.per_second / best_raw.per_second, 3),
        "mapping_only_per_second": round(mapping_only(args)),
        "store": {
            "max_series": args.max_series,
            "points_per_series": args.points,
            "series_count": store.series_count,
            "point_count": store.point_count,
            "dropped_samples": store.dropped_samples,
        },
        "source": {
            "rejected_payloads": source.faults.total,
            "incoming_queue_drops": source.inbox.dropped,
        },
        "rss_mib": {
            "before": round(rss_before, 1),
            # The store at its cap, before the raw loop's unbounded queue has grown the heap.
            "after_first_mapped_round": round(rss_after_first_mapped, 1),
            "after_all_rounds": round(rss_after, 1),
        },
    }


def main() -> None:
    """Measure, print a summary with the ratio, and optionally write JSON."""
    if len(sys.argv) > 1 and sys.argv[1] == "--publish":
        host, port, messages, hosts, gpus = sys.argv[2:7]
        publish(host, int(port), int(messages), int(hosts), int(gpus))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=150_000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=40)
    parser.add_argument("--max-series", type=int, default=1000)
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
