"""Result files: appended whole lines; a crash's torn tail is cut, whole lines are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.batch.result_files import ResultWriter
from daemon.batch.result_lines import ResultFile, answered, failed


def _result(custom_id: str) -> bytes:
    return json.dumps({"custom_id": custom_id, "response": None, "error": None}).encode() + b"\n"


def test_appended_lines_are_read_back_in_order(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path / "a.output.jsonl")
    for custom_id in ("x", "y", "z"):
        writer.append(_result(custom_id))
    writer.close()
    assert ResultWriter(writer.path).reconcile() == ["x", "y", "z"]


def test_a_torn_last_line_is_cut_off_and_the_file_appendable_again(tmp_path: Path) -> None:
    path = tmp_path / "a.output.jsonl"
    whole = _result("x") + _result("y")
    path.write_bytes(whole + _result("z")[:9])
    writer = ResultWriter(path)
    assert writer.reconcile() == ["x", "y"]
    assert path.read_bytes() == whole
    writer.append(_result("z"))
    writer.close()
    assert ResultWriter(path).reconcile() == ["x", "y", "z"]


def test_a_garbled_line_ends_the_usable_part(tmp_path: Path) -> None:
    path = tmp_path / "a.output.jsonl"
    path.write_bytes(_result("x") + b"\0\0\0\0\n" + _result("y"))
    assert ResultWriter(path).reconcile() == ["x"]
    assert path.read_bytes() == _result("x")


def test_a_result_file_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    link = tmp_path / "a.output.jsonl"
    link.symlink_to(elsewhere)  # dangling: exists() says no file is there
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        ResultWriter(link).append(_result("x"))
    assert not elsewhere.exists()


def test_a_missing_file_holds_nothing(tmp_path: Path) -> None:
    assert ResultWriter(tmp_path / "none.jsonl").reconcile() == []


def test_results_follow_the_openai_batch_output_format() -> None:
    ok = answered("batch_ab", 3, "c1", status=200, request_id="", body=b'{"id": "cmpl-1"}')
    assert ok.file is ResultFile.OUTPUT
    assert json.loads(ok.data) == {
        "id": "batch_req_ab_3",
        "custom_id": "c1",
        "response": {"status_code": 200, "request_id": "cmpl-1", "body": {"id": "cmpl-1"}},
        "error": None,
    }
    refused = answered("batch_ab", 4, "c2", status=400, request_id="r9", body=b"{}")
    assert refused.file is ResultFile.ERRORS
    assert json.loads(refused.data)["response"]["request_id"] == "r9"
    gone = failed("batch_ab", 5, "c3", "batch_cancelled", "cancelled")
    assert gone.file is ResultFile.ERRORS
    assert json.loads(gone.data)["error"] == {"code": "batch_cancelled", "message": "cancelled"}
    assert json.loads(gone.data)["response"] is None
    garbled = answered("batch_ab", 6, "c4", status=200, request_id="", body=b"<html>")
    assert garbled.file is ResultFile.ERRORS
    assert json.loads(garbled.data)["error"]["code"] == "invalid_response"
