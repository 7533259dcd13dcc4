"""A real Prometheus server on a free loopback port, scraping a target the test serves.

Started with its storage in a temporary directory and a 1 s scrape interval; ``start`` returns
once ``/-/ready`` answers and the target has been scraped at least once (``up`` is 1), so a
test's first query already sees data. Always killed when the ``with`` block ends.

Optionally it also loads rule files (``rule_files``; each group sets its own ``interval``), for
benchmarks and tests of alerting rules, names its scrape job (``job``, for rules that select
one), and may be given longer to start (``start_timeout_s``).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.processes import end_process
from tests.support.services import free_port

# Generous: Prometheus opens its TSDB and compiles its web UI routes; a loaded two-core CI
# machine can take many seconds for that.
START_TIMEOUT_S = 45.0
JOB = "fixture"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Prometheus:
    """One ``prometheus`` process scraping ``target`` (``host:port``); a context manager."""

    def __init__(
        self,
        executable: str,
        directory: Path,
        target: str,
        *,
        port: int = 0,
        rule_files: Sequence[Path] = (),
        start_timeout_s: float = START_TIMEOUT_S,
        job: str = JOB,
    ) -> None:
        self.executable = executable
        self.directory = directory
        self.target = target
        self.port = port or free_port()
        self.rule_files = tuple(rule_files)
        self.start_timeout_s = start_timeout_s
        self.job = job
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Its log, for messages when a test fails."""
        return self.directory / "prometheus.log"

    def _write_config(self) -> Path:
        config: dict[str, object] = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": self.job, "static_configs": [{"targets": [self.target]}]}
            ],
        }
        if self.rule_files:
            config["rule_files"] = [str(path.resolve()) for path in self.rule_files]
        path = self.directory / "prometheus.yml"
        path.write_text(json.dumps(config))  # JSON is YAML
        return path

    def start(self, *, wait_for_scrape: bool = True) -> None:
        """Start and wait until ready and, unless told not to, the target has been scraped.

        The first scrape comes about 5 s after start (Prometheus 2.x hands targets to its
        scrapers on a 5 s tick); tests that need no scraped data skip that wait.
        """
        if self._process is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            self.executable,
            f"--config.file={self._write_config()}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                message = f"prometheus exited at start:\n{self.log_path.read_text()}"
                raise RuntimeError(message)
            if self._ready() and (not wait_for_scrape or self._scraped()):
                return
            time.sleep(0.1)
        self.stop()
        message = (
            f"prometheus was not ready within {self.start_timeout_s:g} s:\n"
            f"{self.log_path.read_text()}"
        )
        raise RuntimeError(message)

    def get(self, path: str) -> tuple[int, bytes]:
        """GET ``path`` (``/metrics``, ``/api/v1/...``): the status (0 when unreachable), body."""
        return self._get(path)

    def _get(self, path: str) -> tuple[int, bytes]:
        try:
            with _OPENER.open(self.url + path, timeout=2) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, b""
        except OSError:
            return 0, b""

    def _ready(self) -> bool:
        return self._get("/-/ready")[0] == 200

    def _scraped(self) -> bool:
        query = urllib.parse.urlencode({"query": f'up{{job="{self.job}"}} == 1'})
        status, body = self._get(f"/api/v1/query?{query}")
        return status == 200 and bool(json.loads(body)["data"]["result"])

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL)."""
        process, self._process = self._process, None
        end_process(process, timeout_s=15)

    def kill(self) -> None:
        """Kill it at once (SIGKILL), as a crash or the OOM killer would; ``start`` brings it back."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
