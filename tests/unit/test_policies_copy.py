"""``vllm-governor policies copy`` and ``shipped``, run from the checkout (no wheel needed).

tests/e2e/test_installed_package.py runs the same commands from an installed wheel; these pin
what the copy refuses, what it writes and what it says, in a fraction of a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.cli import main
from daemon.shipped import (
    EXAMPLE_CONFIG,
    POLKIT_RULE,
    SYSTEMD_UNIT,
    default_pack,
    shipped_path,
)

REPO = Path(__file__).resolve().parents[2]


def _files(directory: Path) -> dict[Path, bytes]:
    return {
        path.relative_to(directory): path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file()
    }


def test_from_a_checkout_the_shipped_files_are_the_repository_root_s() -> None:
    assert default_pack() == REPO / "policies"
    assert shipped_path(EXAMPLE_CONFIG) == REPO / "config.example.toml"
    assert shipped_path(SYSTEMD_UNIT).is_file()
    assert shipped_path(POLKIT_RULE).is_file()


def test_copy_writes_the_whole_pack_with_its_tests_and_names_each_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    destination = tmp_path / "new" / "policies"
    assert main(["policies", "copy", str(destination)]) == 0
    assert _files(destination) == _files(default_pack())
    assert (destination / "tests" / "ttft-queue.test.yaml").is_file()
    out = capsys.readouterr().out
    for name in _files(destination):
        assert f"  {destination / name}\n" in out
    assert f"vllm-governor test {destination / 'tests'}" in out


def test_copy_refuses_to_overwrite_and_writes_nothing_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ttft-queue.yaml").write_text("# my edits\n")
    assert main(["policies", "copy", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "already has 1 of the pack's files (ttft-queue.yaml); nothing was written" in err
    assert [path.name for path in tmp_path.iterdir()] == ["ttft-queue.yaml"]
    assert (tmp_path / "ttft-queue.yaml").read_text() == "# my edits\n"

    assert main(["policies", "copy", "--force", str(tmp_path)]) == 0
    assert "1 of them overwritten" in capsys.readouterr().out
    assert _files(tmp_path) == _files(default_pack())


def test_copy_onto_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "policies"
    target.write_text("")
    assert main(["policies", "copy", str(target)]) == 1
    assert "exists and is not a directory" in capsys.readouterr().err


def test_shipped_prints_one_path_for_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shipped", SYSTEMD_UNIT]) == 0
    assert capsys.readouterr().out == f"{shipped_path(SYSTEMD_UNIT)}\n"
