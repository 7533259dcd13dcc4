"""Host-name lookups that hang cost their own name, never the loop's shared thread pool.

The seam is the system resolver, ``socket.getaddrinfo``: nothing here can make a real DNS
server stop answering for one name only, so the test makes the resolver hang for one name
(``hung.invalid``) and answers every other name as the system does.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import UNREACHABLE, HttpLimits, http_request
from tests.support.hostile_metrics import HostileServer, answer, ok_head

pytestmark = pytest.mark.asyncio

HUNG = "hung.invalid"


@pytest.fixture
def hanging_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """``socket.getaddrinfo`` hangs for HUNG until the event is set; other names resolve."""
    release = threading.Event()
    system = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == HUNG:
            release.wait(60)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return system(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield release
    release.set()


async def test_hung_lookups_of_one_name_leave_other_names_and_the_shared_pool_alone(
    hanging_resolver: threading.Event,
) -> None:
    limits = HttpLimits(total_s=0.2)
    # A scrape of the hung name every "interval", far more of them than the pool has threads.
    for _ in range(20):
        with pytest.raises(HttpExchangeError) as caught:
            await http_request("GET", f"http://{HUNG}:9/metrics", limits)
        assert caught.value.kind in {UNREACHABLE, "timeout"}
    # The loop's default pool still runs work at once (before: every thread held by a lookup).
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "ran"), timeout=5) == "ran"
    # Another name still resolves, and its server answers.
    with HostileServer(answer(ok_head(2) + b"ok")) as server:
        url = server.base_url.replace("127.0.0.1", "localhost") + "/metrics"
        response = await asyncio.wait_for(http_request("GET", url, HttpLimits(total_s=5)), 10)
    assert response.body == b"ok"


async def test_a_second_lookup_of_a_hung_name_fails_at_once_and_says_why(
    hanging_resolver: threading.Event,
) -> None:
    limits = HttpLimits(total_s=0.2)
    with pytest.raises(HttpExchangeError):
        await http_request("GET", f"http://{HUNG}:9/metrics", limits)
    with pytest.raises(HttpExchangeError) as caught:
        await http_request("GET", f"http://{HUNG}:9/metrics", HttpLimits(total_s=30))
    assert caught.value.kind == UNREACHABLE
    assert "has not returned yet" in str(caught.value)
    # Once the resolver returns, the name is looked up afresh (and fails as the resolver says).
    hanging_resolver.set()
    said = ""
    for _ in range(100):
        with pytest.raises(HttpExchangeError) as again:
            await http_request("GET", f"http://{HUNG}:9/metrics", HttpLimits(total_s=5))
        said = str(again.value)
        if "has not returned yet" not in said:
            break
        await asyncio.sleep(0.05)
    assert "Temporary failure" in said, "the name was looked up again, and its failure said"
