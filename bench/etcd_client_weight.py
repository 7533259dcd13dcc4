"""What an etcd client costs the daemon in memory: the JSON gateway client against aetcd (gRPC).

Each figure comes from a fresh interpreter: resident memory (VmRSS) before and after the
import, then after a session against a real etcd (a lease, 50 puts bound to it with a renewal
each, one create-only transaction), and the OS threads the process has then. Two baselines:
a bare ``import asyncio`` process, and the daemon's own modules (``daemon.engine.governor``)
already imported, which is what a governor pays on top of what it has.

aetcd is not a dependency of the governor: give an interpreter that has it (a scratch venv,
``uv pip install aetcd``) with ``--aetcd-python``; the project's root goes on its path so
that the daemon baseline can be imported there too.

    .venv/bin/python -m bench.etcd_client_weight --aetcd-python /tmp/aetcd-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import asyncio, importlib, json, os, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
for name in sys.argv[3:]:
    importlib.import_module(name)
before = rss()
endpoint, kind = sys.argv[1], sys.argv[2]
if kind == "aetcd":
    import aetcd
else:
    from daemon.fleet.etcd_gateway import EtcdGateway
imported = rss()
async def session():
    if kind == "aetcd":
        host, port = endpoint.removeprefix("http://").split(":")
        async with aetcd.Client(host=host, port=int(port)) as client:
            lease = await client.lease(30)
            for i in range(50):
                await client.put(b"/bench/%d" % i, b"v", lease=lease)
                await lease.refresh()
            await client.transaction(
                compare=[client.transactions.create(b"/bench/slot") == 0],
                success=[client.transactions.put(b"/bench/slot", b"me", lease=lease)],
                failure=[],
            )
    else:
        client = EtcdGateway([endpoint], timeout_s=5)
        lease = await client.grant(30)
        for i in range(50):
            await client.put(f"/bench/{i}", b"v", lease=lease)
            await client.keep_alive(lease)
        await client.create("/bench/slot", b"me", lease=lease)
asyncio.run(session())
print(json.dumps({"before": before, "imported": imported, "session": rss(),
                  "threads": len(os.listdir("/proc/self/task"))}))
"""


def measure(python: str, endpoint: str, kind: str, preload: list[str]) -> dict[str, float]:
    """One fresh interpreter's figures, in MiB (and a thread count)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if python != sys.executable:
        # aetcd's interpreter keeps its own grpcio and protobuf first; the daemon's
        # dependencies come after them, for the baseline with the daemon imported.
        site = next((ROOT / ".venv/lib").glob("python3*/site-packages"))
        env["PYTHONPATH"] = f"{ROOT}:{site}"
    output = subprocess.run(
        [python, "-c", _PROBE, endpoint, kind, *preload],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    ).stdout
    figures: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return figures


def main() -> None:
    """Start one etcd member, measure each client with and without the daemon, print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--aetcd-python", help="an interpreter that has aetcd installed")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    # The tests' etcd harness, importable once the project's root is on the path.
    from tests.support.etcd import EtcdCluster  # noqa: PLC0415

    rows = [("gateway", sys.executable)]
    if args.aetcd_python:
        rows.append(("aetcd", args.aetcd_python))
    with tempfile.TemporaryDirectory() as directory, EtcdCluster(Path(directory)) as cluster:
        for kind, python in rows:
            for preload in ([], ["daemon.engine.governor"]):
                f = measure(python, cluster.endpoints[0], kind, preload)
                base = "asyncio only" if not preload else "daemon imported"
                print(
                    f"{kind:8} {base:16} rss {f['before']:6.1f} MiB, import +"
                    f"{f['imported'] - f['before']:5.1f}, after a session +"
                    f"{f['session'] - f['before']:5.1f}, threads {f['threads']:.0f}"
                )


if __name__ == "__main__":
    main()
