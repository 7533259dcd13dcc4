"""The real etcd the fleet tests start: one member, three members, losing and regaining them."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import pytest

from tests.support.etcd import EtcdCluster

pytestmark = pytest.mark.service("etcd")


def _put(endpoint: str, key: str, value: str) -> None:
    body = json.dumps({"key": _b64(key), "value": _b64(value)}).encode()
    request = urllib.request.Request(f"{endpoint}/v3/kv/put", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=5):
        pass


def _get(endpoint: str, key: str) -> str | None:
    body = json.dumps({"key": _b64(key)}).encode()
    request = urllib.request.Request(f"{endpoint}/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        kvs = json.loads(response.read()).get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_one_member_serves_and_is_reaped(tmp_path: Path) -> None:
    with EtcdCluster(tmp_path, size=1) as cluster:
        member = cluster.members[0]
        _put(member.endpoint, "k", "v")
        assert _get(member.endpoint, "k") == "v"
        inside = member.running
    assert inside
    assert not member.running
    assert not member.listening()


def test_three_members_survive_one_loss_and_regain_quorum(tmp_path: Path) -> None:
    with EtcdCluster(tmp_path, size=3) as cluster:
        first, second, third = cluster.members
        _put(first.endpoint, "k", "before")

        cluster.stop_member(0, kill=True)
        cluster.wait_healthy([second, third])
        _put(second.endpoint, "k", "one down")

        cluster.stop_member(1)
        cluster.wait_unhealthy([third])  # one of three: no leader, no quorum

        cluster.start_member(0)  # two of three again: a leader, the data kept
        cluster.wait_healthy([first, third])
        assert _get(first.endpoint, "k") == "one down"
    assert not any(m.running for m in cluster.members)
