"""PromQL for the catalogue: each short signal name of one vLLM target as a Prometheus query.

The daemon scrapes vLLM itself and derives rates and quantiles over ``signals.window_s``
(:mod:`daemon.sources.derived`); the same signals from a Prometheus that scraped the same
server are, with the same window:

* a gauge: its vLLM families (``vllm:kv_cache_usage_perc``, or the older
  ``vllm:gpu_cache_usage_perc`` where only that exists), reduced over data-parallel engines as
  the vocabulary says (sum, mean, or max of a shared setting);
* a counter's rate: ``sum(rate(vllm:FAMILY_total{...}[WINDOW]))``;
* a quantile: ``histogram_quantile(q, sum by (le) (rate(vllm:FAMILY_bucket{...}[WINDOW])))``.

Signals vLLM does not expose as a number (``healthy`` is the governor's own reading of
``/health``; the KV block count is a label of ``cache_config_info``) and the admission gate's
(HAProxy's exporter names differ) have no query; they stay absent, as "no data".
"""

from __future__ import annotations

from collections.abc import Iterable

from daemon.sources.catalogue import CATALOGUE, CatalogueEntry
from daemon.sources.derived import DERIVED_SIGNALS
from daemon.sources.vllm_vocabulary import BY_NAME, Aggregation, Kind

_REDUCE = {Aggregation.SUM: "sum", Aggregation.MEAN: "avg", Aggregation.SAME: "max"}


def catalogue_queries(selector: str, window_s: float) -> dict[str, str]:
    """Short name → PromQL for one target, whose series ``selector`` picks (``instance="h:p"``).

    Only the signals Prometheus can answer are present (see the module docstring).
    """
    queries = {}
    for entry in CATALOGUE.values():
        query = _query(entry, selector, window_s)
        if query is not None:
            queries[entry.name] = query
    return queries


def _query(entry: CatalogueEntry, selector: str, window_s: float) -> str | None:
    matchers = ",".join([selector, *(f'{key}="{value}"' for key, value in entry.only)])
    if entry.series is not None:
        signal = BY_NAME.get(entry.series)
        if signal is None or signal.kind is not Kind.GAUGE:
            return None
        reduce = _REDUCE[signal.aggregation]
        return _first_present(
            f"{reduce}(vllm:{family}{{{matchers}}})" for family in signal.families
        )
    assert entry.derived is not None
    derived = DERIVED_SIGNALS[entry.derived]
    base = BY_NAME.get(derived.base)
    if base is None:
        return None
    window = f"[{window_s:g}s]"
    if derived.quantile is None and base.kind is Kind.COUNTER:
        return _first_present(
            f"sum(rate(vllm:{family}_total{{{matchers}}}{window}))" for family in base.families
        )
    if derived.quantile is not None and base.kind is Kind.HISTOGRAM:
        return _first_present(
            f"histogram_quantile({derived.quantile:g}, "
            f"sum by (le) (rate(vllm:{family}_bucket{{{matchers}}}{window})))"
            for family in base.families
        )
    return None


def _first_present(alternatives: Iterable[str]) -> str:
    # ``or`` keeps the left side where it has data: the preferred family wins, as in the
    # daemon's own parsing, and a deprecated one shown beside it is never added in.
    return " or ".join(alternatives)


def default_selector(url: str) -> str:
    """The selector of a vLLM server Prometheus scrapes at ``url``: its ``instance`` label."""
    host = url.split("://", 1)[-1].split("/", 1)[0]
    return f'instance="{host}"'
