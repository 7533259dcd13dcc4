"""Bounds on one target's ``/metrics`` page, and the page cut into slices for a gentle parse.

A page is data from outside: its size, the number of samples on it and the number of distinct
values of one label are all chosen by whoever serves it. An exporter that puts a request id
into a label (a "cardinality bomb") serves hundreds of thousands of series; parsed in one go
on the event loop that held every other task for seconds (the watchdog included), and stored,
it filled the store for every target. So, as Prometheus does with ``body_size_limit``,
``sample_limit`` and ``label_limit``, a page over a bound is refused as a whole, with a reason,
before it costs more than reading it; and a page within the bounds is parsed a slice of
:data:`SLICE_LINES` lines at a time, the loop free to run other tasks between slices.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from daemon.core.errors import MetricsParseError

# A slice costs at most a few milliseconds to parse (about 25 µs a line for a line of new
# series on one core), so other tasks wait no longer than that for the loop.
SLICE_LINES = 500
# Identity labels are few and short (a per-engine bucket of vLLM: engine, model_name, le, about
# 100 characters); more is data put into labels, and every stored key, row and reply line would
# carry it. The store's memory budget counts on keys this small.
MAX_LABELS_PER_SERIES = 16
MAX_LABEL_CHARS_PER_SERIES = 512


@dataclass(frozen=True, slots=True)
class PageLimits:
    """What one target's page may hold; a page beyond any of them is refused whole.

    Attributes:
        max_bytes: Size of the page's body as received.
        max_samples: Sample lines on the page, of any family (comments and blank lines aside).
        max_label_values: Distinct values of any one label among the samples the governor
            reads (those of ``vllm:`` families).
    """

    max_bytes: int = 4 << 20
    max_samples: int = 10_000
    max_label_values: int = 1_000


def check_sample_count(text: str, limits: PageLimits, target: str) -> None:
    """Refuse a page with more sample lines than ``limits`` allows, before parsing it.

    Counted in C over the whole text (a line that starts with ``#`` is a comment), so a page of
    a million lines costs milliseconds to refuse instead of seconds to parse.

    Raises:
        MetricsParseError: ``detail="too-many-samples"``.
    """
    lines = text.count("\n") + (not text.endswith("\n"))
    comments = text.count("\n#") + text.startswith("#")
    samples = lines - comments
    if samples > limits.max_samples:
        message = (
            f"the page of {target} holds about {samples} samples, more than its"
            f" max_page_samples ({limits.max_samples}); it is refused unparsed"
        )
        raise MetricsParseError(message, detail="too-many-samples")


def check_labels(
    labels: dict[str, str], seen: dict[str, set[str]], limits: PageLimits, target: str, name: str
) -> None:
    """Note a sample's label values in ``seen``; refuse the page when one label has too many.

    Raises:
        MetricsParseError: ``detail="label-cardinality"`` (too many distinct values of one
            label, or labels too many or too long to be a series' identity).
    """
    chars = sum(len(label) + len(value) for label, value in labels.items())
    if len(labels) > MAX_LABELS_PER_SERIES or chars > MAX_LABEL_CHARS_PER_SERIES:
        message = (
            f"a series of {name} on the page of {target} has {len(labels)} labels of {chars}"
            f" characters, more than {MAX_LABELS_PER_SERIES} or {MAX_LABEL_CHARS_PER_SERIES};"
            " the page is refused"
        )
        raise MetricsParseError(message, detail="label-cardinality")
    for label, value in labels.items():
        values = seen.setdefault(label, set())
        values.add(value)
        if len(values) > limits.max_label_values:
            message = (
                f"label {label!r} has more than {limits.max_label_values} distinct values on"
                f" the page of {target} (max_label_values; seen on {name}): an exporter that"
                " puts ids into labels; the page is refused"
            )
            raise MetricsParseError(message, detail="label-cardinality")


def page_slices(text: str, lines_per_slice: int = SLICE_LINES) -> Iterator[str]:
    """The page as texts of at most ``lines_per_slice`` lines (plus one), each parseable alone.

    A slice that starts inside a family begins with that family's ``# TYPE`` line, so the
    parser types its samples as it would have in the whole page (a counter's samples are
    named alike either way).
    """
    lines = text.split("\n")
    family_type = ""
    for start in range(0, len(lines), lines_per_slice):
        chunk = lines[start : start + lines_per_slice]
        prefix = [family_type] if family_type and not chunk[0].startswith("#") else []
        for line in reversed(chunk):
            if line.startswith("# TYPE "):
                family_type = line
                break
        yield "\n".join(prefix + chunk)
