from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELLS = ("shell=True", "create_subprocess_shell", "os.system(", "os.popen(", '"sh", "-c"')


def test_no_code_of_the_governor_runs_a_shell() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {needle}"
        for package in ("daemon", "actuators")
        for path in (ROOT / package).rglob("*.py")
        for needle in SHELLS
        if needle in path.read_text()
    ]
    assert offenders == []
