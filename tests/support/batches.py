"""Batch jobs seen from outside: input files, the CLI, the result files and the ledger on disk."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.daemon import write_config


def write_batch(
    path: Path, lines: int, *, max_tokens: int = 24, prompt_words: int = 0
) -> list[str]:
    """An input file of ``lines`` completions; returns their custom_ids in order.

    ``prompt_words`` more words lengthen each prompt (the simulated model: a token a word).
    """
    ids = [f"req-{index:04d}" for index in range(lines)]
    filler = "".join(f" w{n % 97}" for n in range(prompt_words))
    path.write_text(
        "".join(
            json.dumps(
                {
                    "custom_id": custom_id,
                    "method": "POST",
                    "url": "/v1/completions",
                    "body": {
                        "prompt": f"line {custom_id} says hello{filler}",
                        "max_tokens": max_tokens,
                    },
                }
            )
            + "\n"
            for custom_id in ids
        ),
        encoding="utf-8",
    )
    return ids


def batch_config(directory: Path, sim_port: int, *, concurrency: int = 4, extra: str = "") -> Path:
    """A daemon config whose one target is the sim on ``sim_port``."""
    return write_config(
        directory,
        extra=(
            f'[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:{sim_port}"\n'
            f"[batch]\nconcurrency = {concurrency}\nretry_base_s = 0.1\nretry_cap_s = 0.5\n" + extra
        ),
    )


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``vllm-governor batch ARGS --config CONFIG``."""
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "batch", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def submit(config: Path, path: Path, *more: str) -> str:
    """Submit ``path`` to the target ``main``; return the job's id."""
    result = cli(config, "submit", str(path), "--target", "main", *more)
    assert result.returncode == 0, result.stderr
    return result.stdout.split(":", 1)[0]


def job_status(config: Path, job: str) -> dict[str, Any]:
    """The daemon's status row of ``job``."""
    result = cli(config, "status", job, "--json")
    assert result.returncode == 0, result.stderr
    row: dict[str, Any] = json.loads(result.stdout)["jobs"][0]
    return row


def eventually(check: Callable[[], bool], timeout_s: float = 60.0, what: str = "") -> None:
    """Poll ``check`` until it holds."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            message = f"not within {timeout_s} s: {what}"
            raise AssertionError(message)
        time.sleep(0.05)


def result_ids(input_path: Path) -> tuple[list[str], list[str]]:
    """The custom_ids of the output file's and the errors file's lines, in file order."""
    stem = input_path.name.removesuffix(".jsonl")
    found = []
    for kind in ("output", "errors"):
        path = input_path.with_name(f"{stem}.{kind}.jsonl")
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        found.append([json.loads(line)["custom_id"] for line in text.splitlines()])
    return found[0], found[1]


def line_count(path: Path) -> int:
    """Whole lines in ``path`` (0 when it does not exist)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def ledger_counts(state_dir: Path, job: str) -> Counter[str]:
    """The job's lines by state, read from the ledger on disk (the daemon may be dead)."""
    with sqlite3.connect(state_dir / "state.sqlite3") as db:
        rows = db.execute(
            "SELECT state, COUNT(*) FROM batch_lines WHERE job_id = ? GROUP BY state", (job,)
        ).fetchall()
    return Counter(dict(rows))


@dataclass(frozen=True)
class Tally:
    """Every custom_id of an input against the result files: what is missing or repeated."""

    lines: int
    lost: int
    duplicated: int
    errors: int

    @classmethod
    def of(cls, ids: list[str], input_path: Path) -> Tally:
        output, errors = result_ids(input_path)
        seen = Counter(output + errors)
        lost = sum(1 for custom_id in ids if seen[custom_id] == 0)
        duplicated = sum(count - 1 for count in seen.values() if count > 1)
        return cls(len(ids), lost, duplicated, len(errors))
