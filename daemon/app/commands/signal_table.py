"""``vllm-governor signals`` as a table: grouped by target and source, values in their units.

Each value is shown in its signal's unit: seconds (milliseconds below one second), bytes
(KiB, MiB, GiB...), ratios as percentages, rates per second, counts as whole numbers. A signal's
unit is the one it is declared with; a short name that says none reads its canonical series'
(``kv_usage`` reads ``vllm_kv_cache_usage_ratio``); other names say theirs by Prometheus'
convention (``..._bytes``). The JSON output keeps the raw numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from daemon.core.errors import ConfigError
from daemon.sources.catalogue import CATALOGUE
from daemon.sources.declarations import unit_of
from daemon.sources.registry import signal_registry

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

_HEADER = ("TARGET", "SOURCE", "SIGNAL", "LABELS", "VALUE", "AGE", "STATE")
_BYTES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def signal_units(config: GovernorConfig) -> dict[str, str]:
    """Each declared signal's unit, by name ("" when it has none)."""
    try:
        declarations = list(signal_registry(config))
    except ConfigError:
        declarations = []  # a conflict is reported where the daemon loads the config
    units = {declaration.name: declaration.unit for declaration in declarations}
    for name, entry in CATALOGUE.items():
        if not units.get(name) and entry.series is not None:
            units[name] = unit_of(entry.series)
    return units


def format_value(value: float | None, unit: str) -> str:
    """``value`` for people, in ``unit``; ``-`` when there is none."""
    if value is None:
        return "-"
    value = float(value) + 0.0  # JSON may carry a whole number as an int; and no -0
    if not math.isfinite(value):
        return str(value)
    if (formatter := _FORMATTERS.get(unit)) is not None:
        return formatter(value)
    return f"{value:.0f}" if value.is_integer() else _plain(value)


def format_seconds(value: float) -> str:
    """Seconds, as milliseconds below one second: ``250 ms``, ``1.5 s``, ``90 s``."""
    if abs(value) < 1:
        return f"{_plain(value * 1000)} ms"
    return f"{_plain(value)} s"


def table_lines(
    answer: Mapping[str, Any], units: Mapping[str, str], notes: Sequence[str] = ()
) -> list[str]:
    """The sources, any notes, then every signal as one aligned table."""
    lines = ["sources:"]
    for source in answer["sources"]:
        detail = f" ({source['detail']})" if source["detail"] else ""
        error = f": {source['last_error']}" if source["last_error"] else ""
        lines.append(
            f"  {source['source']:<20} {source['state']}{detail} for "
            f"{format_seconds(source['for_s'])}{error}"
        )
    if notes:
        lines.append("notes:")
        lines.extend(f"  {note}" for note in notes)
    rows = _grouped(answer["signals"])
    if not rows:
        return [*lines, "no signals"]
    cells = [_cells(row, units) for row in rows]
    widths = [max(len(cell[i]) for cell in [_HEADER, *cells]) for i in range(len(_HEADER))]
    lines.extend(["", _line(_HEADER, widths)])
    previous: tuple[str, str] | None = None
    for cell in cells:
        group = (cell[0], cell[1])
        if previous is not None and group != previous:
            lines.append("")  # a blank line between groups
        # A group's target and source are written on its first row only.
        shown = cell if group != previous else ("", "", *cell[2:])
        lines.append(_line(shown, widths))
        previous = group
    return lines


def _grouped(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by target (in order of appearance, shared signals last), then by source."""
    targets: dict[str, int] = {}
    sources: dict[str, int] = {}
    for row in rows:
        targets.setdefault(row["target"] or "", len(targets))
        sources.setdefault(row["source"] or "", len(sources))

    def key(row: dict[str, Any]) -> tuple[bool, int, bool, int]:
        target, source = row["target"] or "", row["source"] or ""
        # Rows without a source (no series seen at all) close their target's group.
        return (not target, targets[target], not source, sources[source])

    return sorted(rows, key=key)


def _cells(row: dict[str, Any], units: Mapping[str, str]) -> tuple[str, ...]:
    unit = units.get(row["name"]) or unit_of(row["name"])
    labels = ",".join(f"{key}={value}" for key, value in row["labels"].items())
    age = "-" if row["age_s"] is None else format_seconds(row["age_s"])
    return (
        row["target"] or "-",
        row["source"] or "-",
        row["name"],
        labels,
        format_value(row["value"], unit),
        age,
        # An implausible value is withheld; its reason says what it was and why not.
        f"{row['state']} ({row['reason']})" if row.get("reason") else row["state"],
    )


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    # Values and ages align right, as numbers do; the rest left.
    parts = [
        cell.rjust(width) if index in (4, 5) else cell.ljust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
    ]
    return "  ".join(parts).rstrip()


def _plain(value: float) -> str:
    """Enough digits to read: two decimals from 1 up, three significant ones below."""
    if abs(value) >= 100:
        return _number(value, 1)
    if abs(value) >= 1:
        return _number(value, 2)
    return f"{value:.3g}"


def _number(value: float, decimals: int) -> str:
    """``value`` with at most ``decimals`` decimals and no trailing zeros."""
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _bytes(value: float) -> str:
    size, index = abs(value), 0
    while size >= 1024 and index < len(_BYTES) - 1:
        size /= 1024
        index += 1
    sign = "-" if value < 0 else ""
    shown = f"{size:.0f}" if index == 0 else _number(size, 1)
    return f"{sign}{shown} {_BYTES[index]}"


_FORMATTERS: dict[str, Callable[[float], str]] = {
    "seconds": format_seconds,
    "bytes": _bytes,
    "ratio": lambda value: f"{_plain(value * 100)} %",
    "per second": lambda value: f"{_plain(value)}/s",
    "celsius": lambda value: f"{_plain(value)} °C",
    "watts": lambda value: f"{_plain(value)} W",
    "count": lambda value: f"{value:.0f}",
    "bitmask": lambda value: f"{value:.0f}",
}
