"""Verifying HTTP interactivity requests: Slack's signature, a five-minute window, no replays.

Slack signs each request with the app's signing secret: ``X-Slack-Signature`` is ``v0=`` and
the HMAC-SHA256 of ``v0:<X-Slack-Request-Timestamp>:<body>``. slack-sdk's
:class:`~slack_sdk.signature.SignatureVerifier` checks it (in constant time) and the window,
against the injected clock. A valid request can still be captured and sent again within the
window, so each accepted signature is remembered until its timestamp leaves the window; a
second request with it is refused. Socket Mode needs none of this: its envelopes come over a
connection the governor opened with its app token.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier

from daemon.approvals.errors import Unverified, UnverifiedRequest
from daemon.core.clock import Clock

WINDOW_S = 300  # Slack's rule, and what SignatureVerifier enforces
DEFAULT_CAPACITY = 10_000
TIMESTAMP_HEADER = "x-slack-request-timestamp"
SIGNATURE_HEADER = "x-slack-signature"


class _WallClock(SlackClock):
    """slack-sdk's clock interface over the governor's injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock.wall().timestamp()


class SeenSignatures:
    """Signatures already accepted, each kept until its timestamp leaves the window.

    Bounded: when it is full of signatures still inside their window it refuses new ones
    (:attr:`Unverified.OVERLOADED`) rather than forget one, which would let its replay through.
    At the default size that takes over 30 genuine clicks a second for five minutes.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._until: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._until)

    def remember(self, signature: str, until: float, now: float) -> None:
        """Remember ``signature`` until ``until`` (epoch seconds).

        Raises:
            UnverifiedRequest: It was seen before (replayed), or the cache is full.
        """
        self._forget_expired(now)
        if signature in self._until:
            message = "this request was already received: a replay"
            raise UnverifiedRequest(Unverified.REPLAYED, message)
        if len(self._until) >= self._capacity:
            message = "too many requests inside the replay window; refused to stay safe"
            raise UnverifiedRequest(Unverified.OVERLOADED, message)
        self._until[signature] = until

    def _forget_expired(self, now: float) -> None:
        # Insertion order is nearly expiry order (timestamps are close to the clock), so the
        # front holds the oldest; an out-of-order entry only stays a little longer.
        while self._until:
            signature, until = next(iter(self._until.items()))
            if until >= now:
                break
            del self._until[signature]


class RequestVerifier:
    """Accepts a request only if Slack signed it, recently, and it was not seen before."""

    def __init__(
        self, signing_secret: str, clock: Clock, *, capacity: int = DEFAULT_CAPACITY
    ) -> None:
        self._clock = clock
        self._verifier = SignatureVerifier(signing_secret, clock=_WallClock(clock))
        self._seen = SeenSignatures(capacity)

    def check_headers(self, headers: Mapping[str, str]) -> tuple[str, str]:
        """The checks that need no body: both headers present, the timestamp in the window.

        The endpoint makes them before it reads a byte of the body, so that a request that can
        never verify costs no more than its headers.

        Args:
            headers: The request's headers (any case).

        Returns:
            The timestamp and the signature, as sent.

        Raises:
            UnverifiedRequest: ``MALFORMED`` or ``STALE``.
        """
        lowered = {name.lower(): value for name, value in headers.items()}
        timestamp = lowered.get(TIMESTAMP_HEADER, "")
        signature = lowered.get(SIGNATURE_HEADER, "")
        if not (timestamp.isascii() and timestamp.isdigit()) or not signature.startswith("v0="):
            message = "the request lacks Slack's signature headers"
            raise UnverifiedRequest(Unverified.MALFORMED, message)
        if abs(self._clock.wall().timestamp() - int(timestamp)) > WINDOW_S:
            message = f"the request's timestamp is more than {WINDOW_S} s away from now"
            raise UnverifiedRequest(Unverified.STALE, message)
        return timestamp, signature

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Check one request; return normally when it may be handled.

        Args:
            body: The raw body, exactly as received (the signature covers its bytes).
            headers: The request's headers (any case).

        Raises:
            UnverifiedRequest: With the check that failed as its ``reason``.
        """
        timestamp, signature = self.check_headers(headers)
        now = self._clock.wall().timestamp()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            message = "the request's body is not UTF-8"
            raise UnverifiedRequest(Unverified.MALFORMED, message) from None
        if not self._verifier.is_valid(text, timestamp, signature):
            message = "the request's signature does not match its body"
            raise UnverifiedRequest(Unverified.FORGED, message)
        self._seen.remember(signature, int(timestamp) + WINDOW_S, now)
