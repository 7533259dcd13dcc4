"""HTTP interactivity: Slack's signature, the five-minute window and the replay guard."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from daemon.approvals.errors import Unverified, UnverifiedRequest
from daemon.approvals.signatures import RequestVerifier
from tests.support.slack_double import SignedRequest, signed_request
from tests.unit.approvals.examples import T0, FakeClock

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = int(T0.timestamp())
PAYLOAD = {"type": "block_actions", "user": {"id": "U0ALICE"}, "actions": []}
GOOD = signed_request(PAYLOAD, SECRET, NOW)


def _with(request: SignedRequest, **headers: str) -> SignedRequest:
    return SignedRequest(request.body, {**request.headers, **headers})


@dataclass(frozen=True)
class Case:
    """One request arriving alone, on a fresh verifier, and the verdict."""

    name: str
    request: SignedRequest
    refused: Unverified | None
    headers_lowercase: bool = False
    extra: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("genuine", GOOD, None),
    Case("genuine, header names in lower case", GOOD, None, headers_lowercase=True),
    Case(
        "a modified body",
        SignedRequest(GOOD.body.replace(b"ALICE", b"MALLORY"), GOOD.headers),
        Unverified.FORGED,
    ),
    Case("signed with another secret", signed_request(PAYLOAD, "guessed", NOW), Unverified.FORGED),
    Case(
        "a signature for another timestamp",
        _with(GOOD, **{"X-Slack-Request-Timestamp": str(NOW - 1)}),
        Unverified.FORGED,
    ),
    Case("301 s old", signed_request(PAYLOAD, SECRET, NOW - 301), Unverified.STALE),
    Case("exactly 300 s old", signed_request(PAYLOAD, SECRET, NOW - 300), None),
    Case("301 s ahead", signed_request(PAYLOAD, SECRET, NOW + 301), Unverified.STALE),
    Case(
        "no signature",
        SignedRequest(GOOD.body, {"X-Slack-Request-Timestamp": str(NOW)}),
        Unverified.MALFORMED,
    ),
    Case(
        "no timestamp",
        SignedRequest(GOOD.body, {"X-Slack-Signature": GOOD.headers["X-Slack-Signature"]}),
        Unverified.MALFORMED,
    ),
    Case(
        "a timestamp that is not a number",
        _with(GOOD, **{"X-Slack-Request-Timestamp": "12e9"}),
        Unverified.MALFORMED,
    ),
    Case(
        "a signature of another version",
        _with(GOOD, **{"X-Slack-Signature": "v1=abc"}),
        Unverified.MALFORMED,
    ),
    Case(
        "a body that is not UTF-8", SignedRequest(b"\xff\xfe", GOOD.headers), Unverified.MALFORMED
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_one_request(case: Case) -> None:
    verifier = RequestVerifier(SECRET, FakeClock())
    headers = case.request.headers
    if case.headers_lowercase:
        headers = {name.lower(): value for name, value in headers.items()}
    if case.refused is None:
        verifier.verify(case.request.body, headers)
    else:
        with pytest.raises(UnverifiedRequest) as raised:
            verifier.verify(case.request.body, headers)
        assert raised.value.reason is case.refused


def test_a_replay_is_refused_within_the_window_and_stale_after_it() -> None:
    clock = FakeClock()
    verifier = RequestVerifier(SECRET, clock)
    verifier.verify(GOOD.body, GOOD.headers)
    clock.now = T0 + timedelta(seconds=299)
    with pytest.raises(UnverifiedRequest) as raised:
        verifier.verify(GOOD.body, GOOD.headers)
    assert raised.value.reason is Unverified.REPLAYED
    clock.now = T0 + timedelta(seconds=301)
    with pytest.raises(UnverifiedRequest) as raised:
        verifier.verify(GOOD.body, GOOD.headers)
    assert raised.value.reason is Unverified.STALE


def test_a_full_replay_cache_refuses_rather_than_forgets() -> None:
    clock = FakeClock()
    verifier = RequestVerifier(SECRET, clock, capacity=2)
    first, second, third = (signed_request({"n": n}, SECRET, NOW) for n in range(3))
    verifier.verify(first.body, first.headers)
    verifier.verify(second.body, second.headers)
    with pytest.raises(UnverifiedRequest) as raised:
        verifier.verify(third.body, third.headers)
    assert raised.value.reason is Unverified.OVERLOADED
    # Once the first two leave the window, they are forgotten and there is room again.
    clock.now = T0 + timedelta(seconds=301)
    later = signed_request({"n": 3}, SECRET, NOW + 301)
    verifier.verify(later.body, later.headers)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.refused in {None, Unverified.STALE}], ids=lambda c: c.name
)
def test_the_headers_alone_tell_a_stale_request(case: Case) -> None:
    # What the endpoint checks before it reads the body: only the headers, so only staleness
    # and missing headers; a forged body passes here and is caught by verify.
    verifier = RequestVerifier(SECRET, FakeClock())
    if case.refused is Unverified.STALE:
        with pytest.raises(UnverifiedRequest) as raised:
            verifier.check_headers(case.request.headers)
        assert raised.value.reason is Unverified.STALE
    else:
        assert verifier.check_headers(case.request.headers) == (
            case.request.headers["X-Slack-Request-Timestamp"],
            case.request.headers["X-Slack-Signature"],
        )
