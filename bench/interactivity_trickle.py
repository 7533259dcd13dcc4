"""The Slack interactivity endpoint under a trickle attack: its resident memory, and who is served.

The endpoint (``serve_interactivity``, default limits) runs alone in a child process on a
loopback port. The attack, from this process: ``--connections`` attackers, each sending a
head with a fresh timestamp (no valid signature: an attacker has none) and ``Content-Length:
--body-kib`` KiB, then the body a slice at a time, spread evenly over ``--seconds``; an attacker
whose connection ends opens another (after 0.5 s if it ended at once), until ``--seconds`` are
over. The child's resident memory is read before, every 0.2 s during (its peak), and
``--settle`` seconds after the attack (what it kept). Five genuine signed clicks are posted
during the attack, one after it.

Each attacking connection ends one way: answered (the status: ``503`` over the connection
cap, ``408`` cut off by the read timeout, ``401`` when it did finish and the signature was
checked), or reset/closed without an answer (evicted at the cap, or refused in a flood).

    .venv/bin/python -m bench.interactivity_trickle [--connections 400] [--seconds 60]
        [--body-kib 250] [--settle 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support.slack_double.interactivity import signed_request

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PATH = "/slack/interactivity"
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
SLICES = 50
RECONNECT_S = 0.5
CLICKS = 5
CLICK = {"type": "block_actions", "user": {"id": "U0ALICE"}, "actions": []}

# The endpoint alone, as the daemon runs it; it prints its port, then serves until killed.
CHILD = f"""
import asyncio, sys
from daemon.core.approval_settings import SlackSection
from daemon.core.clock import SystemClock
from daemon.engine.approvals.slack.slack_http import serve_interactivity

async def main():
    section = SlackSection(transport="http", http_listen_port=0, http_path={PATH!r})
    def listening(port):
        print(port, flush=True)
    await serve_interactivity(section, {SECRET!r}, SystemClock(), asyncio.Queue(), listening)

asyncio.run(main())
"""


@dataclass
class Report:
    """What one attack did to the endpoint."""

    connections: int
    seconds: float
    body_kib: int
    rss_before_mib: float = 0.0
    rss_peak_mib: float = 0.0
    rss_after_mib: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    clicks_during: list[str] = field(default_factory=list)
    click_after: str = ""

    @property
    def peak_ratio(self) -> float:
        """Peak over before."""
        return self.rss_peak_mib / self.rss_before_mib

    @property
    def after_ratio(self) -> float:
        """After over before: what the attack left behind."""
        return self.rss_after_mib / self.rss_before_mib


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB."""
    resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident_pages * PAGE_KIB / 1024


async def trickle(port: int, body_bytes: int, seconds: float) -> str:
    """One attacking connection; how it ended."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return f"refused to connect ({exc.__class__.__name__})"
    now = int(time.time())
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {body_bytes}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"X-Slack-Request-Timestamp: {now}\r\nX-Slack-Signature: v0={'0' * 64}\r\n\r\n"
    )
    answered = asyncio.ensure_future(reader.readline())  # the status line
    try:
        writer.write(head.encode())
        piece = b"a" * (body_bytes // SLICES)
        for _ in range(SLICES):
            if answered.done():
                break
            writer.write(piece)
            await writer.drain()
            await asyncio.wait([answered], timeout=seconds / SLICES)
        raw = await asyncio.wait_for(answered, timeout=seconds + 30)
    except (ConnectionError, TimeoutError) as exc:
        return f"no answer ({exc.__class__.__name__})"
    finally:
        answered.cancel()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    status = raw.split(b"\r\n", 1)[0].decode("latin-1")
    return status.split(" ", 1)[1] if status else "closed without an answer"


async def attacker(
    port: int, body: int, seconds: float, until: float, outcomes: collections.Counter[str]
) -> None:
    """One attacker: a trickling connection, and another as soon as it ends, until ``until``."""
    while time.monotonic() < until:
        started = time.monotonic()
        outcomes[await trickle(port, body, seconds)] += 1
        if time.monotonic() - started < RECONNECT_S:
            await asyncio.sleep(RECONNECT_S)  # refused at once: try again shortly, not in a spin


async def clicker(port: int, seconds: float) -> list[str]:
    """Genuine clicks spread over the attack; each one's status."""
    statuses = []
    for _ in range(CLICKS):
        await asyncio.sleep(seconds / (CLICKS + 1))
        statuses.append(await click(port))
    return statuses


async def click(port: int) -> str:
    """A genuine signed click, over a plain connection; its status line."""
    request = signed_request(CLICK, SECRET, int(time.time()))
    head = f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(request.body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in request.headers.items())
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head.encode() + b"\r\n" + request.body)
        raw = await asyncio.wait_for(reader.readline(), timeout=30)
        writer.close()
    except (ConnectionError, TimeoutError) as exc:
        return f"no answer ({exc.__class__.__name__})"
    return raw.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")[2] or "closed"


async def attack(pid: int, port: int, report: Report, settle_s: float) -> None:
    """Run the attack, sampling the child's memory; fill in ``report``."""
    report.rss_before_mib = report.rss_peak_mib = rss_mib(pid)
    body = report.body_kib * 1024
    until = time.monotonic() + report.seconds
    outcomes: collections.Counter[str] = collections.Counter()
    attackers = [
        asyncio.ensure_future(attacker(port, body, report.seconds, until, outcomes))
        for _ in range(report.connections)
    ]
    clicks = asyncio.ensure_future(clicker(port, report.seconds))
    while not all(task.done() for task in [*attackers, clicks]):
        report.rss_peak_mib = max(report.rss_peak_mib, rss_mib(pid))
        await asyncio.sleep(0.2)
    report.outcomes = dict(outcomes)
    report.clicks_during = clicks.result()
    await asyncio.sleep(settle_s)
    report.click_after = await click(port)
    report.rss_after_mib = rss_mib(pid)


def main() -> None:
    """Parse the options, run the child and the attack, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--body-kib", type=int, default=250)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = Report(args.connections, args.seconds, args.body_kib)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the endpoint logs each refusal; the report says enough
        cwd=Path.cwd(),
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        time.sleep(1.0)  # let the child settle before the baseline is read
        asyncio.run(attack(child.pid, port, report, args.settle))
    finally:
        child.kill()
        child.wait()
    print(
        f"{report.connections} connections x {report.body_kib} KiB over {report.seconds:g} s\n"
        f"RSS before {report.rss_before_mib:.1f} MiB, peak {report.rss_peak_mib:.1f} MiB "
        f"(x{report.peak_ratio:.2f}), after {report.rss_after_mib:.1f} MiB "
        f"(x{report.after_ratio:.2f})\n"
        f"attackers: {json.dumps(report.outcomes, sort_keys=True)}\n"
        f"genuine clicks during the attack: {', '.join(report.clicks_during)}\n"
        f"a genuine click after it: {report.click_after}"
    )
    if args.json:
        document = {**asdict(report), "peak_ratio": report.peak_ratio}
        args.json.write_text(json.dumps({**document, "after_ratio": report.after_ratio}) + "\n")


if __name__ == "__main__":
    main()
