"""HAProxy's ``show stat`` CSV, parsed into rows of named fields.

The answer is one header line (``# pxname,svname,qcur,...``, with a trailing comma) and one
line per frontend, backend and server. Field names and their meaning are HAProxy's own
(management guide, section 9.1 "CSV format"); the ones the governor reads:

- ``qcur`` requests waiting in this queue; ``qmax`` the most ever; ``qlimit`` the server's
  ``maxqueue`` (empty: none);
- ``scur`` sessions being served; ``smax`` the most ever; ``slim`` the limit (a server's
  ``maxconn``; empty: none); ``stot`` sessions served; ``rate`` sessions over the last second;
- ``qtime``, ``ctime``, ``rtime``, ``ttime`` queue, connect, response (to the response headers)
  and total times in ms, averaged over the last 1024 requests;
- ``hrsp_2xx``, ``hrsp_5xx`` HTTP responses by class; ``econ`` connection errors (on a backend
  this includes requests that no server took: queue timeouts), ``eresp`` response errors,
  ``wretr`` retries; ``status`` (``UP``, ``DOWN``, ``MAINT``, ``no check``, ``UP 1/3``...).

An empty field means "not applicable" or "no limit", never zero: :meth:`StatRow.number` says
None for it. Row types come from the ``type`` field (0 frontend, 1 backend, 2 server).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.core.errors import MetricsParseError

BACKEND_ROW = "BACKEND"  # the svname HAProxy gives a backend's aggregate row


@dataclass(frozen=True, slots=True)
class StatRow:
    """One line of ``show stat``: a frontend, a backend or a server.

    Attributes:
        proxy: ``pxname``, the frontend or backend name.
        name: ``svname``: the server's name, or ``FRONTEND`` / ``BACKEND``.
        fields: Every field by its header name, as text.
    """

    proxy: str
    name: str
    fields: Mapping[str, str]

    @property
    def is_backend(self) -> bool:
        """Whether this is a backend's aggregate row."""
        return self.name == BACKEND_ROW

    def text(self, field: str) -> str:
        """The raw text of ``field`` ("" when HAProxy left it empty or does not know it)."""
        return self.fields.get(field, "")

    def number(self, field: str) -> float | None:
        """``field`` as a number; None when empty (not applicable, no limit) or not a number."""
        raw = self.fields.get(field, "")
        if not raw:
            return None
        try:
            return float(raw)
        except ValueError:
            return None


def parse_show_stat(text: str) -> tuple[StatRow, ...]:
    """Rows of a ``show stat`` answer.

    Raises:
        MetricsParseError: The answer is not ``show stat`` CSV (no header, a short line).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# pxname,"):
        first = lines[0][:120] if lines else "(empty)"
        message = f"haproxy answered something that is not 'show stat' CSV: {first!r}"
        raise MetricsParseError(message, detail="not-csv")
    header = _columns(lines[0].removeprefix("# "))
    rows = []
    for number, raw in enumerate(csv.reader(lines[1:]), start=2):
        values = _trimmed(raw)
        if len(values) < 2 or len(values) > len(header):
            message = f"'show stat' line {number}: {len(values)} fields, header {len(header)}"
            raise MetricsParseError(message, detail="not-csv")
        fields = dict(zip(header, values, strict=False))
        rows.append(StatRow(fields["pxname"], fields["svname"], fields))
    return tuple(rows)


def _columns(header: str) -> list[str]:
    return _trimmed(next(csv.reader([header])))


def _trimmed(values: list[str]) -> list[str]:
    # Every line ends with a comma, which reads as one empty field too many.
    return values[:-1] if values and values[-1] == "" else values
