"""etcd's v3 API through its JSON gateway, over the daemon's own HTTP client.

etcd (3.4 and later) serves its gRPC API as JSON over HTTP at ``/v3/...`` on the client port:
keys and values are base64, 64-bit numbers (lease IDs, revisions) are strings, and a failed
call answers an HTTP error status with ``{"error", "code"}`` (a gRPC code). This client uses
the unary calls only (put, range, delete, txn, lease grant, keepalive, revoke): each is one
exchange of :func:`~daemon.core.http_client.http_request`, bounded by ``timeout_s`` and gone
when its ``await`` ends. Watches are streams, which that client does not read; the fleet polls
the few keys it needs instead (see ``docs/fleet.md``).

Several members may be named. A call goes to the member that answered last; when it refuses,
times out (a member cut off from the majority holds a request until etcd's own timeout) or
says it is unavailable, the call is tried on the next one, once around the list. When none
answers, :class:`~daemon.fleet.errors.EtcdUnavailable` says the fleet's state is unknown.
A write that ends so is *unknown*, not undone: a member cut off from the majority may have
taken it into its log, and the returning majority then commits it (measured: a put refused
as unavailable with two of three members down was in force once they came back, in about
half the runs). Callers must treat such a write as possibly done.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import HttpLimits, http_request
from daemon.fleet.errors import EtcdAnswerError, EtcdUnavailable

# gRPC codes under which another member may well succeed: DEADLINE_EXCEEDED, UNAVAILABLE.
_TRY_ANOTHER_CODES = frozenset({4, 14})
# etcd's answers are small (a fleet's records); anything larger is not what was asked for.
_MAX_BODY_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd holds it.

    Attributes:
        key: The key, as text.
        value: The value's bytes.
        lease: The lease the key is bound to (0: none).
        create_revision: The revision that created the key.
        mod_revision: The revision that last changed it.
    """

    key: str
    value: bytes
    lease: int
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class Compare:
    """One comparison of a transaction: a key's revision (or lease) equals ``value``.

    Attributes:
        key: The key compared.
        target: ``CREATE`` (its create revision; 0 when it does not exist), ``MOD`` (its last
            change's revision) or ``LEASE`` (the lease it is bound to).
        value: The number it must equal.
    """

    key: str
    target: Literal["CREATE", "MOD", "LEASE"]
    value: int

    def to_json(self) -> dict[str, str]:
        """The comparison as the gateway reads it."""
        field = {"CREATE": "create_revision", "MOD": "mod_revision", "LEASE": "lease"}
        return {
            "key": _b64(self.key.encode()),
            "result": "EQUAL",
            "target": self.target,
            field[self.target]: str(self.value),
        }


@dataclass(frozen=True, slots=True)
class TxnOp:
    """One operation of a transaction: a put, a delete of a prefix, or a read of a key.

    Build it with :meth:`put`, :meth:`delete_prefix` or :meth:`get`.
    """

    body: Mapping[str, Any]

    @classmethod
    def put(cls, key: str, value: bytes, *, lease: int = 0) -> TxnOp:
        """Set ``key`` to ``value`` (bound to ``lease`` when one is given)."""
        put: dict[str, Any] = {"key": _b64(key.encode()), "value": _b64(value)}
        if lease:
            put["lease"] = str(lease)
        return cls({"request_put": put})

    @classmethod
    def delete(cls, key: str) -> TxnOp:
        """Delete ``key``."""
        return cls({"request_delete_range": {"key": _b64(key.encode())}})

    @classmethod
    def delete_prefix(cls, prefix: str) -> TxnOp:
        """Delete every key that starts with ``prefix``."""
        raw = prefix.encode()
        return cls(
            {"request_delete_range": {"key": _b64(raw), "range_end": _b64(_prefix_end(raw))}}
        )

    @classmethod
    def get(cls, key: str) -> TxnOp:
        """Read ``key`` (its value comes back in :attr:`TxnResult.found`)."""
        return cls({"request_range": {"key": _b64(key.encode())}})

    def to_json(self) -> Mapping[str, Any]:
        """The operation as the gateway reads it."""
        return self.body


@dataclass(frozen=True, slots=True)
class TxnResult:
    """What a transaction did.

    Attributes:
        succeeded: Whether every comparison held (the success branch ran).
        revision: The store's revision after it (the key's new ``MOD`` revision after a put).
        found: The keys its reads found, in the order of the reads.
    """

    succeeded: bool
    revision: int
    found: tuple[KeyValue, ...]


class EtcdGateway:
    """A client of etcd's v3 JSON gateway over one or more members.

    Args:
        endpoints: The members' client URLs (``http://HOST:PORT``), in order of preference.
        timeout_s: The bound of one exchange with one member.
    """

    def __init__(self, endpoints: Sequence[str], timeout_s: float) -> None:
        if not endpoints:
            message = "an etcd client needs at least one endpoint"
            raise ValueError(message)
        self._endpoints = tuple(url.rstrip("/") for url in endpoints)
        self._limits = HttpLimits(total_s=timeout_s, max_body_bytes=_MAX_BODY_BYTES)
        self._preferred = 0

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The members' client URLs."""
        return self._endpoints

    async def grant(self, ttl_s: int) -> int:
        """A new lease of ``ttl_s`` seconds; its ID."""
        answer = await self._call("/v3/lease/grant", {"TTL": ttl_s})
        return _int(answer, "ID")

    async def keep_alive(self, lease: int) -> int:
        """Renew ``lease``; the seconds it now has, 0 when it no longer exists."""
        answer = await self._call("/v3/lease/keepalive", {"ID": str(lease)})
        # The gateway wraps the stream's one answer in "result"; an expired lease has no TTL.
        result = answer.get("result", answer)
        return _int(result, "TTL") if isinstance(result, dict) else 0

    async def revoke(self, lease: int) -> None:
        """End ``lease`` now: every key bound to it is deleted."""
        await self._call("/v3/lease/revoke", {"ID": str(lease)}, gone_is_fine=True)

    async def put(self, key: str, value: bytes, *, lease: int = 0) -> None:
        """Set ``key`` to ``value``, bound to ``lease`` when one is given."""
        body: dict[str, Any] = {"key": _b64(key.encode()), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        await self._call("/v3/kv/put", body)

    async def get(self, key: str) -> KeyValue | None:
        """The key, or None when it does not exist."""
        answer = await self._call("/v3/kv/range", {"key": _b64(key.encode())})
        found = _key_values(answer)
        return found[0] if found else None

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        """Every key that starts with ``prefix``, in key order."""
        raw = prefix.encode()
        body = {"key": _b64(raw), "range_end": _b64(_prefix_end(raw))}
        return _key_values(await self._call("/v3/kv/range", body))

    async def delete(self, key: str) -> int:
        """Delete ``key``; how many keys went (0 or 1)."""
        answer = await self._call("/v3/kv/deleterange", {"key": _b64(key.encode())})
        return _int(answer, "deleted")

    async def create(self, key: str, value: bytes, *, lease: int = 0) -> bool:
        """Create ``key`` only if it does not exist (one transaction); whether it was created."""
        put: dict[str, Any] = {"key": _b64(key.encode()), "value": _b64(value)}
        if lease:
            put["lease"] = str(lease)
        body = {
            "compare": [
                {
                    "key": _b64(key.encode()),
                    "result": "EQUAL",
                    "target": "CREATE",
                    "create_revision": "0",
                }
            ],
            "success": [{"request_put": put}],
        }
        answer = await self._call("/v3/kv/txn", body)
        return bool(answer.get("succeeded", False))

    async def transaction(
        self,
        compare: Sequence[Compare],
        success: Sequence[TxnOp],
        failure: Sequence[TxnOp] = (),
    ) -> TxnResult:
        """One transaction: ``success`` when every ``compare`` holds, else ``failure``.

        The building block of a compare-and-swap: compare a key's ``MOD`` revision with the
        one read, put only if nobody wrote it since.
        """
        body = {
            "compare": [check.to_json() for check in compare],
            "success": [op.to_json() for op in success],
            "failure": [op.to_json() for op in failure],
        }
        answer = await self._call("/v3/kv/txn", body)
        found: list[KeyValue] = []
        for response in answer.get("responses", []):
            ranged = response.get("response_range") if isinstance(response, dict) else None
            if isinstance(ranged, dict):
                found.extend(_key_values(ranged))
        header = answer.get("header", {})
        return TxnResult(
            succeeded=bool(answer.get("succeeded", False)),
            revision=_int(header if isinstance(header, dict) else {}, "revision"),
            found=tuple(found),
        )

    async def _call(
        self, path: str, body: Mapping[str, Any], *, gone_is_fine: bool = False
    ) -> dict[str, Any]:
        """One call, on the preferred member, then on each other one while they fail."""
        data = json.dumps(body).encode()
        failures: list[str] = []
        for step in range(len(self._endpoints)):
            index = (self._preferred + step) % len(self._endpoints)
            url = self._endpoints[index] + path
            try:
                response = await http_request(
                    "POST",
                    url,
                    self._limits,
                    body=data,
                    headers={"Content-Type": "application/json"},
                )
            except HttpExchangeError as exc:
                failures.append(f"{self._endpoints[index]}: {exc}")
                continue
            answer = _json_object(response.body, url)
            if response.status == 200:
                self._preferred = index
                return answer
            code = answer.get("code")
            if code in _TRY_ANOTHER_CODES or response.status == 503:
                failures.append(f"{self._endpoints[index]}: {answer.get('error', response.status)}")
                continue
            if gone_is_fine and code == 5:  # NOT_FOUND: a lease that already expired
                return answer
            message = f"etcd at {url} answered HTTP {response.status}: {answer.get('error', '')}"
            raise EtcdAnswerError(message)
        message = "no etcd member answered: " + "; ".join(failures)
        raise EtcdUnavailable(message)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (etcd's ``range_end``)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\0"  # every key
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _json_object(raw: bytes, url: str) -> dict[str, Any]:
    try:
        answer = json.loads(raw)
    except ValueError as exc:
        message = f"etcd at {url} answered something that is not JSON"
        raise EtcdAnswerError(message) from exc
    if not isinstance(answer, dict):
        message = f"etcd at {url} answered JSON that is not an object"
        raise EtcdAnswerError(message)
    return answer


def _int(answer: Mapping[str, Any], name: str) -> int:
    """A 64-bit number of an answer (the gateway writes them as strings; absent means 0)."""
    try:
        return int(answer.get(name, 0))
    except (TypeError, ValueError) as exc:
        message = f"etcd answered {name}={answer.get(name)!r}, not a number"
        raise EtcdAnswerError(message) from exc


def _key_values(answer: Mapping[str, Any]) -> list[KeyValue]:
    found = []
    for item in answer.get("kvs", []):
        try:
            found.append(
                KeyValue(
                    key=base64.b64decode(item["key"]).decode("utf-8", errors="replace"),
                    value=base64.b64decode(item.get("value", "")),
                    lease=_int(item, "lease"),
                    create_revision=_int(item, "create_revision"),
                    mod_revision=_int(item, "mod_revision"),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            message = f"etcd answered a key that cannot be read: {exc}"
            raise EtcdAnswerError(message) from exc
    return found
