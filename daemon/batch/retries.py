"""What is worth sending again: answers and failures that a moment later may go differently.

Retried: 429 and every 5xx (the server overloaded, restarting, or failing this request for
now), and every failure to get an answer except a request that cannot be sent at all (a
connection refused while vLLM restarts, a timeout, a connection cut off, a garbled or
oversized answer from a server in trouble). Not retried: every other answer, 4xx included (the
request itself is wrong; sending it again gets the same answer), and an invalid request.
"""

from __future__ import annotations

from daemon.core import http_client

RETRYABLE_FAILURES = frozenset(
    {
        http_client.REFUSED,
        http_client.UNREACHABLE,
        http_client.TIMEOUT,
        http_client.CLOSED,
        http_client.MALFORMED,
        http_client.OVERSIZED,
    }
)


def retryable_status(status: int) -> bool:
    """Whether an answer with ``status`` is worth asking again."""
    return status == 429 or status >= 500


def retryable_failure(kind: str) -> bool:
    """Whether a failure of ``kind`` (``daemon.core.http_client``) is worth trying again."""
    return kind in RETRYABLE_FAILURES
