"""A demo too short for the governor to act is refused with the minimum (issue 19, finding 9).

Before, ``--duration 30`` ran for a minute and ended with "the governor proposed and changed
nothing".
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from daemon.app.cli import main
from daemon.app.defaults import EXIT_USAGE
from daemon.app.demo.scenario import DEFAULT_PACK, minimum_duration_s


def test_a_too_short_duration_is_refused_with_the_minimum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--duration", "30", "--approve", "deny"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "--duration 30 is too short for the governor to act" in error
    assert "ttft-queue acts only after its condition has held for 180 s" in error
    assert "use --duration 300 or more" in error


def test_the_minimum_follows_the_pack(tmp_path: Path) -> None:
    assert minimum_duration_s(DEFAULT_PACK)[0] == 300.0
    pack = tmp_path / "pack"
    shutil.copytree(DEFAULT_PACK, pack)
    queue = pack / "ttft-queue.yaml"
    queue.write_text(queue.read_text().replace("\nfor: 3m\n", "\nfor: 15s\n"))
    assert minimum_duration_s(pack)[0] == 135.0  # the end-to-end test's pack runs 140 s
    queue.unlink()
    # Without the story's policy: the acting policy that waits least.
    minimum, why = minimum_duration_s(pack)
    assert minimum < 300.0
    assert "acts only after its condition has held for" in why
