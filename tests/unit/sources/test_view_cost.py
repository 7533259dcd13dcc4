"""The view's cost grows with the servers, not with their square (issue 15, finding 10).

Each derived signal (a rate, a quantile) is computed for every server at once; the view asked
for it once per server and kept that server's values, so N servers paid N times for each.
The store below is a real one that counts the windows read, one per counter per signal.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.sources.samples import SeriesKey
from daemon.sources.store import Point, SignalStore
from daemon.sources.view import ViewContext, signal_rows
from daemon.sources.vllm_metrics import parse_vllm_metrics
from tests.unit.sources.vllm_pages import V0_33


class WindowCountingStore(SignalStore):
    """A signal store that counts the windows of points read and the keys looked through."""

    windows_read = 0
    keys_examined = 0
    newest_read = 0

    def latest(self, key: SeriesKey) -> Point | None:
        """Count, then read as the store does."""
        self.newest_read += 1
        return super().latest(key)

    def points(self, key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        """Count, then read as the store does."""
        self.windows_read += 1
        return super().points(key, since)

    def point_columns(
        self, key: SeriesKey, since: float = float("-inf")
    ) -> tuple[Sequence[float], Sequence[float]] | None:
        """Count a window read as columns, then read as the store does."""
        columns = super().point_columns(key, since)
        if columns is not None:
            self.windows_read += 1
        return columns

    def keys(self, name: str, **labels: str) -> list[SeriesKey]:
        """Count every key of ``name`` (the store looks through them all), then find."""
        self.keys_examined += len(super().keys(name))
        return super().keys(name, **labels)


def _store_of(servers: int) -> tuple[WindowCountingStore, tuple[str, ...]]:
    store = WindowCountingStore()
    targets = tuple(f"server-{index}" for index in range(servers))
    for at in (40.0, 70.0, 100.0):
        for target in targets:
            scrape = parse_vllm_metrics(V0_33, instance=target, at=at, source=f"vllm/{target}")
            store.add(scrape.samples)
    return store, targets


def _cost_per_server(servers: int) -> tuple[float, float]:
    """Windows read and keys looked through by one view, per server."""
    store, targets = _store_of(servers)
    context = ViewContext(now=100.0, window_s=60.0, stale_after=lambda _: 10.0, targets=targets)
    rows = signal_rows(store, context)
    assert {row.target for row in rows if row.name == "ttft_p95_s"} == set(targets)
    return store.windows_read / servers, store.keys_examined / servers


def test_each_server_costs_the_same_windows_however_many_servers_there_are() -> None:
    (one, _), (sixteen, _) = _cost_per_server(1), _cost_per_server(16)
    assert one > 0
    assert sixteen == one  # was 16 x one: every server's derived signals once per server


def test_each_server_costs_the_same_key_lookups_however_many_servers_there_are() -> None:
    (_, one), (_, sixteen) = _cost_per_server(1), _cost_per_server(16)
    assert one > 0
    assert sixteen == one  # was ~16 x one: each row's base series sought among every server's


def _windows_read_for(signals: frozenset[str]) -> int:
    return _view_of(signals).windows_read


def _view_of(signals: frozenset[str]) -> WindowCountingStore:
    """The store after one view of ``signals``, with what the view read of it counted."""
    store = WindowCountingStore()
    for at in (40.0, 70.0, 100.0):
        store.add(parse_vllm_metrics(V0_33, instance="main", at=at, source="vllm/main").samples)
    context = ViewContext(
        now=100.0, window_s=60.0, stale_after=lambda _: 10.0, targets=("main",), only=signals
    )
    rows = signal_rows(store, context)
    assert {row.name for row in rows} == signals
    return store


def test_a_histograms_quantiles_read_its_buckets_once() -> None:
    p95 = _windows_read_for(frozenset({"ttft_p95_s"}))
    three = _windows_read_for(frozenset({"ttft_p50_s", "ttft_p95_s", "ttft_p99_s"}))
    assert three == p95  # was 3 x p95: each quantile read every bucket's window again


def test_a_histograms_quantiles_find_its_buckets_and_their_newest_points_once() -> None:
    p95 = _view_of(frozenset({"ttft_p95_s"}))
    three = _view_of(frozenset({"ttft_p50_s", "ttft_p95_s", "ttft_p99_s"}))
    # Were 3 x p95's bucket lookups and newest points, less the memo's freshness checks.
    assert three.newest_read == p95.newest_read
    assert three.keys_examined == p95.keys_examined
