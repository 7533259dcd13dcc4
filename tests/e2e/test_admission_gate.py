"""The two-speed governor's fast loop, end to end: the daemon moves HAProxy's cap live.

HAProxy starts with a cap above vLLM's max-num-seqs (12 > 8), so the first thing the daemon
must do is bring it down; every cap it sets afterwards stays at or below 8.

Everything is real: ``vllm-governor sim serve`` (max-num-seqs 8) behind HAProxy on the shipped
reference config, the daemon as a subprocess reading both and running the shipped
``admission-cap`` policy (its TTFT budget made tiny, so that any load is over it and the
controller must cut), and clients sending bursts through the gate. The test watches HAProxy
itself (``show stat``), the daemon's ``status`` and the gate journal.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.completions_load import Load
from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.retune import eventually
from tests.support.services import free_port, require_command
from tests.support.sim_serve import SimProcess, sim_serve

pytestmark = [pytest.mark.service("haproxy"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_POLICY = ROOT / "policies" / "admission-cap.yaml"
MAX_NUM_SEQS = 8
CONFIGURED_CAP = 12  # HAProxy's config lets in more than vLLM runs: the daemon must clamp it
BURST = 200  # requests per client at most: each burst is stopped once the loop has cut


def _policy() -> str:
    """The shipped policy, faster to fire and with a TTFT budget no request meets.

    Its controller reads over a 10 s settle window instead of 60 s: a quantile needs half its
    window covered by scrapes, so at 60 s the first cut could come no sooner than 30 s after
    the daemon started.
    """
    text = SHIPPED_POLICY.read_text(encoding="utf-8")
    for pattern, new in [
        (r"\nfor: \d+s\n", "\nfor: 1s\n"),
        (r"ttft_target_s: [0-9.]+", "ttft_target_s: 0.0001"),
        (r"settle_s: \d+", "settle_s: 10"),
    ]:
        text, found = re.subn(pattern, new, text)
        assert found == 1, f"{SHIPPED_POLICY}: {pattern!r} drifted"
    return text


def _config(directory: Path, sim: SimProcess, socket_path: Path) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "admission-cap.yaml").write_text(_policy())
    vllm = f"""
[[vllm]]
name = "main"
url = "http://127.0.0.1:{sim.port}"
scrape_interval_s = 0.5
unit = "sim.service"
config_path = "{directory / "vllm.yaml"}"
[vllm.gate]
enabled = true
stats_socket = "{socket_path}"
backend = "{BACKEND}"
server = "{SERVER}"
interval_s = 0.5
timeout_s = 0.5
stale_after_s = 2.0
"""
    config = write_config(directory, extra=vllm)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    text = text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.5\n")
    config.write_text(text + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n")
    return config


def _frontend_port(haproxy: Haproxy) -> int:
    for line in haproxy.config_path.read_text().splitlines():
        if line.strip().startswith("bind 127.0.0.1:"):
            return int(line.rsplit(":", 1)[1])
    message = "no bind line"
    raise AssertionError(message)


class CapWatch:
    """Reads HAProxy's maxconn of the server in a thread, and keeps every value seen."""

    def __init__(self, haproxy: Haproxy) -> None:
        self._haproxy = haproxy
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.seen.append(int(self._haproxy.stat(BACKEND, SERVER)["slim"]))
            except (OSError, ValueError, AssertionError):
                continue  # HAProxy stopped on purpose

    def __enter__(self) -> CapWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def _changes(directory: Path) -> list[dict[str, Any]]:
    path = directory / "state" / "state.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT policy, state, before, after FROM cap_changes ORDER BY id")
        return [dict(zip(("policy", "state", "before", "after"), r, strict=True)) for r in rows]


def _gate(directory: Path) -> Callable[[], dict[str, Any]]:
    def read() -> dict[str, Any]:
        status = call_daemon(directory / "control.sock", "status")
        gate: dict[str, Any] = status["gates"]["main"]
        return gate

    return read


@contextmanager
def _setup(directory: Path) -> Iterator[tuple[Haproxy, RunningDaemon]]:
    executable = require_command("haproxy")
    socket_path = directory / "haproxy.sock"
    with sim_serve(directory, f"max-num-seqs: {MAX_NUM_SEQS}\n") as sim:
        rendered = render_reference_config(
            frontend_port=free_port(),
            server_port=sim.port,
            stats_socket=socket_path,
            maxconn=CONFIGURED_CAP,
            queue_timeout="60s",  # this test is about the cap: every request must get through
        )
        with (
            Haproxy(executable, directory, rendered, socket_path) as haproxy,
            running_daemon(_config(directory, sim, socket_path)) as daemon,
        ):
            daemon.wait_for("READY=1")
            yield haproxy, daemon


def test_the_daemon_moves_the_cap_live_under_a_burst_and_holds_while_haproxy_is_down(
    short_tmp: Path,
) -> None:
    gate = _gate(short_tmp)
    with _setup(short_tmp) as (haproxy, daemon), CapWatch(haproxy) as watch:
        eventually(lambda: gate()["policy"] or None, "admission-cap steering the gate", daemon)
        # The configured cap is above max-num-seqs: brought down at once, before any load.
        clamp = {"policy": "clamp", "state": "applied", "before": CONFIGURED_CAP, "after": 8}
        assert _changes(short_tmp)[0] == clamp
        port = _frontend_port(haproxy)

        # A burst: 16 clients against 8 sequences, lasting until the loop has cut the cap, live
        # (a cut after the burst has left would relieve nothing: the controller holds then).
        with Load(port, clients=16, requests_per_client=BURST, max_tokens=100, stream=True) as load:
            eventually(
                lambda: (watch.seen and watch.seen[-1] < MAX_NUM_SEQS) or None, "a cut", daemon
            )
            load.stop()
            outcomes = load.outcomes()
        failures = [o for o in outcomes if not o.ok]
        assert not failures, failures  # no request dropped by a change of the cap
        moved = _changes(short_tmp)
        assert moved, "no change journaled"
        assert {row["policy"] for row in moved[1:]} == {"admission-cap"}
        assert all(row["state"] == "applied" for row in moved), moved
        assert all(row["after"] <= MAX_NUM_SEQS for row in moved), moved

        # HAProxy down: the gate's signals go stale, the loop says so and sends nothing.
        haproxy.stop()
        eventually(
            lambda: "no fresh gate_cap" in gate()["hold"] or None, "the loop holding", daemon
        )
        rows_while_down = len(_changes(short_tmp))
        time.sleep(2.0)  # four of the policy's steps would have come and gone
        assert len(_changes(short_tmp)) == rows_while_down
        status = call_daemon(short_tmp / "control.sock", "status")
        [source] = [s for s in status["sources"] if s["source"] == "haproxy-main"]
        assert source["state"] != "up", source

        # HAProxy back at its configured cap: fresh signals, the cap clamped again, and the
        # loop cutting again under the next burst.
        haproxy.start()
        eventually(lambda: len(_changes(short_tmp)) > rows_while_down or None, "clamped", daemon)
        assert _changes(short_tmp)[rows_while_down] == clamp
        with Load(port, clients=16, requests_per_client=BURST, max_tokens=100) as load:
            eventually(
                lambda: len(_changes(short_tmp)) > rows_while_down + 1 or None, "a cut", daemon
            )
            load.stop()
            outcomes = load.outcomes()
        assert all(o.ok for o in outcomes)
        assert all(row["after"] <= MAX_NUM_SEQS for row in _changes(short_tmp))

        # The policy removed: the gate opens back to max-num-seqs.
        (short_tmp / "policies" / "admission-cap.yaml").unlink()
        eventually(
            lambda: _changes(short_tmp)[-1]["policy"] == "restore" or None, "restored", daemon
        )
        assert int(haproxy.stat(BACKEND, SERVER)["slim"]) == MAX_NUM_SEQS
    assert watch.seen, "the watch never read HAProxy"
    assert min(watch.seen) < MAX_NUM_SEQS
