"""``vllm-governor signals`` as a table: units formatted, grouped by target and source."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.app.commands.signal_table import format_value, table_lines

# fmt: off
CASES = [
    (None, "ratio", "-"),
    (0.0123, "seconds", "12.3 ms"),
    (0.25, "seconds", "250 ms"),
    (1.5, "seconds", "1.5 s"),
    (8.02274e10, "bytes", "74.7 GiB"),
    (512, "bytes", "512 B"),
    (3 * 1024**2, "bytes", "3 MiB"),
    (0.8125, "ratio", "81.25 %"),
    (0.0, "per second", "0/s"),
    (0.0012, "per second", "0.0012/s"),
    (123.456, "per second", "123.5/s"),
    (12.0, "count", "12"),
    (29205, "", "29205"),
    (1.27344, "", "1.27"),
    (-0.0, "", "0"),
    (float("nan"), "", "nan"),
]
# fmt: on


@pytest.mark.parametrize(("value", "unit", "shown"), CASES)
def test_values_in_their_units(value: float | None, unit: str, shown: str) -> None:
    assert format_value(value, unit) == shown


def _row(name: str, target: str | None, source: str | None, value: float | None) -> dict[str, Any]:
    state = "ok" if value is not None else "no_data"
    age = None if value is None else 0.05
    return {"name": name, "target": target, "labels": {}, "value": value, "source": source,
            "age_s": age, "state": state}  # fmt: skip


def test_an_aligned_table_grouped_by_target_then_source() -> None:
    answer = {
        "sources": [
            {"source": "vllm/main", "state": "up", "detail": "", "for_s": 3.0, "last_error": ""}
        ],
        "signals": [
            _row("host_disk_used_bytes", None, "host", 3.5e10),
            _row("kv_usage", "main", "vllm/main", 0.5),
            _row("gate_cap", "main", None, None),
            _row("ttft_p95_s", "main", "vllm/main", 0.2),
            _row("kv_usage", "b", None, None),
        ],
    }
    answer["signals"][3]["labels"] = {"engine": "0"}
    units = {"kv_usage": "ratio", "ttft_p95_s": "seconds"}
    lines = table_lines(answer, units, ["no NVIDIA driver (reason: none)"])
    assert lines[:4] == [
        "sources:",
        "  vllm/main            up for 3 s",
        "notes:",
        "  no NVIDIA driver (reason: none)",
    ]
    assert lines[5:] == [
        "TARGET  SOURCE     SIGNAL                LABELS       VALUE    AGE  STATE",
        "main    vllm/main  kv_usage                            50 %  50 ms  ok",
        "                   ttft_p95_s            engine=0    200 ms  50 ms  ok",
        "",
        "main    -          gate_cap                               -      -  no_data",
        "",
        "b       -          kv_usage                               -      -  no_data",
        "",
        "-       host       host_disk_used_bytes            32.6 GiB  50 ms  ok",
    ]
