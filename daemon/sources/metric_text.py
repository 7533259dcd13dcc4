"""The samples of a Prometheus text page: prometheus_client's reading, at a fraction of its cost.

prometheus_client's parser reads label sets a character at a time in Python; on a live vLLM
page (some 480 samples, each with three or four labels) it was most of the daemon's CPU at a
2 s scrape. :func:`page_samples` gives exactly the samples that
``text_string_to_metric_families`` gives (names, labels and values, in page order, counters'
``_total`` naming included), reading each line with one regular expression. It takes only
the plain shape that exporters such as vLLM write (``name{label="value",...} number``, ``#
HELP`` and ``# TYPE`` lines with plain names, a type prometheus_client knows); anything else
on the page (an escape in a label value, a timestamp, odd spacing, a quoted name, a line
prometheus_client would refuse) hands the whole text to prometheus_client, so what is
accepted, what is refused and why are prometheus_client's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families

ParsedSample = tuple[str, dict[str, str], float]
"""A sample's name, labels and value."""

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
# A value prometheus_client reads with int() or float(): no spaces, no "_", not too long
# for int() and float() to agree.
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
_SAMPLE_LINE = re.compile(rf"({_NAME})(?:\{{({_LABEL}(?:,{_LABEL})*)\}})? ({_NUMBER})")
_PLAIN_NUMBER_LINES = re.compile(rf"(?:{_NUMBER})(?:\n(?:{_NUMBER}))*")
_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_PLAIN_NAME = re.compile(_NAME)
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e\t]")
_LONGEST_NUMBER = 40
_TYPES = ("counter", "gauge", "summary", "histogram", "untyped")
# A family's sample names by its type, after prometheus_client (summary quantiles are ``''``).
_SUFFIXES = {
    "counter": ("",),
    "gauge": ("",),
    "summary": ("_count", "_sum", ""),
    "histogram": ("_count", "_sum", "_bucket"),
}


class _NotPlain(Exception):
    """A line outside the plain shape: prometheus_client reads the text instead."""


def page_samples(text: str) -> Iterator[ParsedSample]:
    """The samples of ``text`` in page order, as prometheus_client reads them.

    Raises:
        ValueError (or another error of prometheus_client's): The text is not a page that
            prometheus_client reads; samples before the error may have been given already,
            as prometheus_client gives them.
    """
    try:
        samples = _plain_samples(text)
    except _NotPlain:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                yield sample.name, sample.labels, float(sample.value)
        return
    yield from samples


def plain_samples(text: str) -> list[ParsedSample] | None:
    """The samples of ``text`` when every line is of the plain shape, one per sample line.

    None when a line is not: prometheus_client would read the text then, and its samples need
    not follow the lines one for one.
    """
    try:
        return _plain_samples(text)
    except _NotPlain:
        return None


def plain_values(numbers: tuple[str, ...]) -> list[float] | None:
    """Sample lines' numbers as the plain shape reads them; None when any one is not plain.

    Checked with one regular expression over them all and read by ``float`` in C: a page's
    three hundred numbers a call at a time were a third of reading a page of a known shape.
    """
    if not numbers:
        return []
    if max(map(len, numbers)) > _LONGEST_NUMBER:
        return None
    joined = "\n".join(numbers)
    if not _PLAIN_NUMBER_LINES.fullmatch(joined):
        return None
    values = list(map(float, numbers))
    if joined.startswith("-") or "\n-" in joined:
        # int() reads "-0" as 0, not -0.0 (see _number_value): only a negative number can.
        values = [
            _number_value(number) if value == 0.0 else value
            for number, value in zip(numbers, values, strict=True)
        ]
    return values


def _number_value(number: str) -> float:
    """A plain number's value as prometheus_client reads it: int() first, then float().

    On a plain number the two agree (both round correctly) but for an integer's zero: int()
    reads "-0" as 0. So float() it is, without the cost of int() failing on every fraction.
    """
    value = float(number)
    if value == 0.0 and number.lstrip("+-").isdigit():
        return 0.0
    return value


def _plain_samples(text: str) -> list[ParsedSample]:
    """prometheus_client's family state machine over lines of the plain shape only."""
    found: list[ParsedSample] = []
    name, typ = "", "untyped"
    family: list[ParsedSample] = []
    allowed: tuple[str, ...] = ()
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("#"):
            comment = _comment(line)
            if comment is None:
                continue
            kind, candidate, declared = comment
            if kind == "HELP":
                if candidate != name:
                    _build(name, typ, family, found)
                    name, typ, family, allowed = candidate, "untyped", [], (candidate,)
                continue
            if candidate != name:
                _build(name, typ, family, found)
                name, family = candidate, []
            typ = declared
            allowed = tuple(name + suffix for suffix in _SUFFIXES.get(typ, ("",)))
        elif line:
            sample = _sample(line)
            if sample[0] in allowed:
                family.append(sample)
            else:
                _build(name, typ, family, found)
                name, typ, family, allowed = "", "untyped", [], ()
                _build(sample[0], "untyped", [sample], found)
    _build(name, typ, family, found)
    return found


def _comment(line: str) -> tuple[str, str, str] | None:
    """``(HELP or TYPE, the family's name, its type)`` of a plain line; None for a comment."""
    if _NOT_PRINTABLE_ASCII.search(line):
        raise _NotPlain  # str.split and prometheus_client differ on other spaces
    parts = line.split(None, 3)
    if len(parts) < 2 or parts[1] not in ("TYPE", "HELP"):
        if '"' in line:
            raise _NotPlain  # a quote changes how prometheus_client splits the line
        return None
    if len(parts) == 2 or any('"' in part for part in parts[:3]):
        raise _NotPlain
    if not _PLAIN_NAME.fullmatch(parts[2]):
        raise _NotPlain
    if parts[1] == "HELP":
        return "HELP", parts[2], ""
    if len(parts) < 4 or parts[3] not in _TYPES:
        raise _NotPlain
    return "TYPE", parts[2], parts[3]


def _sample(line: str) -> ParsedSample:
    match = _SAMPLE_LINE.fullmatch(line)
    if match is None:
        raise _NotPlain
    name, labels_text, number = match.groups()
    labels: dict[str, str] = {}
    if labels_text is not None:
        for label, value in _LABEL_PAIR.findall(labels_text):
            if label in labels or label.startswith("__"):
                raise _NotPlain  # prometheus_client refuses both
            labels[label] = value
    if len(number) > _LONGEST_NUMBER:
        raise _NotPlain
    return name, labels, _number_value(number)


def _build(name: str, typ: str, family: list[ParsedSample], found: list[ParsedSample]) -> None:
    """A finished family's samples, named as prometheus_client's Metric names them."""
    if name == "":
        return
    if typ == "counter":
        if name.endswith("_total"):
            if not _PLAIN_NAME.fullmatch(name[: -len("_total")]):
                raise _NotPlain  # prometheus_client refuses the family's stripped name
        else:
            family = [(sample + "_total", labels, value) for sample, labels, value in family]
    found.extend(family)
