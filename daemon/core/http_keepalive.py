"""One server's exchanges over one kept-alive connection: what a source that polls it holds.

A vLLM source asks its server for ``/metrics`` and ``/health`` every 2 s. A new connection for
each (connect, accept, then abort) was a sixth of the daemon's CPU with four live servers:
the connection is kept instead, between exchanges and between polls, as Prometheus keeps one
per target. It is kept only as :func:`~daemon.core.http_client.http_request_kept` allows (a
clean, framed HTTP/1.1 answer); an exchange that fails, times out or is cancelled closes it, so
a slow or hostile server costs no more than before. Exchanges are meant to come one at a time
(a source polls its server one request after another); one that comes while another is in
flight simply opens a connection of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.core.http_client import HttpLimits, HttpResponse, KeptConnection, http_request_kept


class KeptAliveExchanges:
    """An :class:`~daemon.core.http_client.HttpExchange` that keeps its last connection open.

    Call :meth:`close` when done with it: the kept connection is closed then.
    """

    def __init__(self) -> None:
        self._idle: KeptConnection | None = None

    async def __call__(
        self,
        method: str,
        url: str,
        limits: HttpLimits,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One exchange within ``limits``, on the kept connection when it is usable.

        Raises:
            HttpExchangeError: no usable answer; ``kind`` says why.
        """
        kept, self._idle = self._idle, None  # in use: not for an exchange that comes meanwhile
        response, kept = await http_request_kept(
            method, url, limits, kept, body=body, headers=headers
        )
        self._keep(kept)
        return response

    def _keep(self, kept: KeptConnection | None) -> None:
        """Keep ``kept``, closing one that another exchange kept meanwhile: one is enough."""
        if self._idle is not None:
            self._idle.close()
        self._idle = kept

    def keeps_a_connection(self) -> bool:
        """Whether a connection is kept open now."""
        return self._idle is not None

    def close(self) -> None:
        """Close the kept connection, if any."""
        if self._idle is not None:
            self._idle.close()
            self._idle = None
