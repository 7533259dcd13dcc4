from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_layers_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_engine_code_never_reads_the_clock_directly() -> None:
    offenders = []
    for path in (ROOT / "daemon").rglob("*.py"):
        if path.name == "clock.py" or "app" in path.relative_to(ROOT / "daemon").parts[:1]:
            continue
        text = path.read_text()
        for needle in ("time.time()", "time.monotonic()", "datetime.now("):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
