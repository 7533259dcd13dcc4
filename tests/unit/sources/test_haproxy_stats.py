"""Parsing ``show stat`` and stats socket addresses, without an HAProxy."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.errors import MetricsParseError
from daemon.sources.haproxy_runtime import ServerRef, parse_stats_address
from daemon.sources.haproxy_stats import parse_show_stat

# Trimmed from HAProxy 2.6's answer: the same header shape (trailing comma, "# " prefix).
ANSWER = """\
# pxname,svname,qcur,qmax,scur,smax,slim,stot,status,qtime,rtime,hrsp_5xx,check_desc,
vllm,main,0,0,4,4,4,9,UP,873,1749,0,"Layer7 check passed, 200",
vllm,BACKEND,6,12,10,16,,41,UP,291,585,3,,

"""


def test_rows_keep_every_field_and_empty_means_unknown() -> None:
    server, backend = parse_show_stat(ANSWER)
    assert (server.proxy, server.name, server.is_backend) == ("vllm", "main", False)
    assert backend.is_backend
    assert server.number("slim") == 4.0
    assert backend.number("slim") is None  # no limit: not zero
    assert server.number("status") is None  # text is not a number
    assert server.text("status") == "UP"
    assert server.text("check_desc") == "Layer7 check passed, 200"  # quoted commas
    assert backend.number("qcur") == 6.0
    assert server.number("no_such_field") is None


@pytest.mark.parametrize(
    "text",
    ["", "No such proxy.\n", "# pxname,svname,qcur,\nvllm,main,0,1,2,3,\n"],
)
def test_anything_else_is_a_parse_error(text: str) -> None:
    with pytest.raises(MetricsParseError):
        parse_show_stat(text)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("/run/haproxy/admin.sock", Path("/run/haproxy/admin.sock")),
        ("unix@/run/haproxy/admin.sock", Path("/run/haproxy/admin.sock")),
        ("127.0.0.1:9999", ("127.0.0.1", 9999)),
        ("ipv4@127.0.0.1:9999", ("127.0.0.1", 9999)),
        ("ipv6@[::1]:9999", ("::1", 9999)),
        ("localhost:80", ("localhost", 80)),
    ],
)
def test_stats_addresses_as_haproxy_writes_them(text: str, address: object) -> None:
    assert parse_stats_address(text) == address


@pytest.mark.parametrize("text", ["admin.sock", "host:", ":80", "host:http", "host:70000"])
def test_bad_stats_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="stats socket"):
        parse_stats_address(text)


@pytest.mark.parametrize(
    ("backend", "server"),
    [("vllm", "main 1"), ("vllm;", "main"), ("vllm", ""), ("vllm", "a\nshow info"), ("b/x", "s")],
)
def test_names_that_could_smuggle_a_command_are_refused(backend: str, server: str) -> None:
    with pytest.raises(ValueError, match="HAProxy"):
        ServerRef(backend, server)


def test_plain_names_make_a_server_reference() -> None:
    assert str(ServerRef("vllm-8b_a.1", "gpu:0")) == "vllm-8b_a.1/gpu:0"
