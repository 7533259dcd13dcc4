"""Garbage, duplicated and implausible pages beside a healthy target, each shown with its reason.

Part of the hostile-world suite (issue 15): a metrics server that answers noise, a page cut
off mid-line, a valid page ending in garbage, HTML or JSON with HTTP 200, bytes that are not
HTTP at all, a body shorter than its ``Content-Length``, or one series twice; and one that
serves a well-formed page of implausible values. The daemon stays up, pings its watchdog in
time, keeps the healthy target fresh, shows every broken target down with the reason (as plain
text: a page's escapes never reach an operator's terminal), none of their values stored, and
the implausible values as ``implausible``, with the reason, never as values.
"""

from __future__ import annotations

import random
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon, call_daemon_paged
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.hostile_metrics import HEAD_END, HostileServer, answer
from tests.support.hostile_watch import WATCHDOG_USEC, wait_until_fresh, watching

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PAGE = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
RUNNING = b'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0\n'
KV = b'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.8125\n'
# A well-formed page whose values cannot be: shown implausible, never as values.
LIAR = PAGE.replace(RUNNING, RUNNING.replace(b"12.0", b"-3")).replace(
    KV, KV.replace(b"0.8125", b"7.5")
)
WATCH_S = 12.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def _http(body: bytes, content_type: bytes, *, length: int | None = None) -> bytes:
    head = [
        b"HTTP/1.1 200 OK",
        b"Content-Type: " + content_type,
        b"Content-Length: %d" % (len(body) if length is None else length),
    ]
    return b"\r\n".join(head) + HEAD_END + body


# Served by a well-behaved HTTP server (text/plain, a right Content-Length): name -> (page,
# the source's detail, a piece of its reason).
PAGES = {
    # Noise that starts by clearing the terminal of whoever reads the reason in ``status``.
    "noise": (b"\x1b[2J\x1b[31m" + random.Random(15).randbytes(64 << 10), "unparsable", "?[2J"),
    "cut": (PAGE[: PAGE.index(RUNNING) + 30], "unparsable", "not a Prometheus text page"),
    "tail": (PAGE + b'vllm:num_requests_waiting{engine="0",mo\x00\xff\xfe', "unparsable", ""),
    "twice": (PAGE.replace(RUNNING, RUNNING + RUNNING), "duplicate-series", "duplicate series"),
}
# Served on a raw socket: what no HTTP server library would answer.
ANSWERS = {
    "html": (
        _http(b"<!DOCTYPE html><html><body><h1>Welcome</h1></body></html>\n", b"text/html"),
        "unparsable",
        "not a Prometheus text page",
    ),
    "json": (
        _http(b'{"error": "metrics are elsewhere"}', b"application/json"),
        "unparsable",
        "not a Prometheus text page",
    ),
    "not-http": (random.Random(16).randbytes(4096), "unreachable", ""),
    "short": (_http(PAGE[:2000], b"text/plain", length=len(PAGE)), "unreachable", ""),
}


def _instance(name: str, url: str) -> str:
    return f'[[vllm]]\nname = "{name}"\nurl = "{url}"\n'


def test_garbage_pages_are_shown_down_with_the_reason_and_the_healthy_target_stays_fresh(
    short_tmp: Path,
) -> None:
    with ExitStack() as stack:
        healthy = stack.enter_context(FixtureExporter(Script(metrics=PAGE)))
        urls = {
            name: stack.enter_context(FixtureExporter(Script(metrics=page))).base_url
            for name, (page, _, _) in PAGES.items()
        }
        urls |= {
            name: stack.enter_context(HostileServer(answer(raw))).base_url
            for name, (raw, _, _) in ANSWERS.items()
        }
        liar = stack.enter_context(FixtureExporter(Script(metrics=LIAR)))
        extra = _instance("healthy", healthy.base_url) + _instance("liar", liar.base_url)
        extra += "".join(_instance(name, url) for name, url in urls.items())
        config = write_config(short_tmp, extra=extra)
        socket = short_tmp / "control.sock"
        daemon = stack.enter_context(running_daemon(config, watchdog_usec=WATCHDOG_USEC))
        daemon.wait_for("READY=1")
        with watching(daemon, "healthy") as watch:
            wait_until_fresh(socket, "healthy")
            end = time.monotonic() + WATCH_S
            while time.monotonic() < end:
                watch.look(socket)
                time.sleep(0.5)
        print(watch.summary("garbage pages"))
        assert daemon.process.poll() is None
        watch.assert_healthy_served()

        status = call_daemon(socket, "status")
        sources = {entry["source"]: entry for entry in status["sources"]}
        for name, (_, detail, reason) in {**PAGES, **ANSWERS}.items():
            entry = sources[f"vllm/{name}"]
            assert (entry["state"], entry["detail"]) == ("down", detail), entry
            assert reason in entry["last_error"], entry
            assert entry["last_error"].isprintable(), entry
        rows = call_daemon_paged(socket, "signals", "signals", prefix="")["signals"]
        assert not [row for row in rows if row["target"] in urls and row["value"] is not None]
        # The liar's page is read (its source up); the values that cannot be are shown so.
        assert sources["vllm/liar"]["state"] == "up", sources["vllm/liar"]
        lies = {
            row["name"]: row
            for row in rows
            if row["target"] == "liar" and "engine" not in row["labels"]
        }
        for name, reason in (("running", "-3 is outside"), ("kv_usage", "7.5 is outside")):
            assert lies[name]["state"] == "implausible", lies[name]
            assert lies[name]["value"] is None, lies[name]
            assert lies[name]["reason"].startswith(reason), lies[name]
        assert "Traceback" not in daemon.log_text()

        daemon.signal(signal.SIGTERM)
        assert daemon.process.wait(timeout=10) == 0
