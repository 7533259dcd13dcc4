"""The memory floor under the governor: what its libraries cost before a line of its own code.

Each layer runs in a fresh interpreter (this one's) that does everything the layers before it
did, then what the layer adds, and reports its resident memory (VmRSS after a garbage
collection). Layers, in order:

1. Python with a running asyncio loop: the bare process ``bench.idle_footprint`` runs beside
   the governor;
2. pydantic, validating one model (the configuration and the policies are pydantic models,
   a binding choice of the design card);
3. CEL with its standard math extension, one expression compiled and run (the policies'
   expression language; the shipped pack calls ``math.greatest``);
4. PyYAML's C loader reading one document (policy files);
5. APScheduler's cron trigger, one next fire time (the policies' schedules; the shipped
   pack's maintenance window is one);
6. prometheus_client, one counter rendered (the governor's own ``/metrics``; its page parser
   reads vLLM's);
7. sqlite3 with one table (the state database: journal, approvals, batch ledger);
8. the modules ``vllm-governor run`` imports, configuration loaded, store still empty.

Layers 1-7 are the floor for any code built on these libraries; the goal of issue 15 (finding
10, at most 50 MB = 47.7 MiB with four live servers) is printed beside it. Every layer is
measured three times in the same run and the median kept (RSS of a fresh interpreter moves by
a page or two between runs; the machine's load does not move it).

With ``--other-cel PYTHON``, an interpreter that has cel-python (the pure-Python CEL) installed,
the same expression is compiled and run there too, over the same bare loop, beside the C++
runtime's layer: what it adds, and what one evaluation costs in each (mean of 1,000).

    .venv/bin/python -m bench.footprint_floor [--other-cel PYTHON] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_MIB = 50e6 / 2**20
RUNS = 3

_ASYNCIO = """
import asyncio
loop = asyncio.new_event_loop()
loop.run_until_complete(asyncio.sleep(0))
"""

_PYDANTIC = """
import pydantic
class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    name: str
    limit: float = pydantic.Field(gt=0)
_Model.model_validate({"name": "floor", "limit": 1.5})
"""

_CEL = """
import cel_expr_python.cel as cel
import cel_expr_python.ext.ext_math as ext_math
_env = cel.NewEnv(variables={"x": cel.Type.DOUBLE}, extensions=[ext_math.ExtMath()])
_env.compile("math.greatest(x * 0.75, 32.0)").eval(data={"x": 64.0})
"""

_YAML = """
import yaml
yaml.load("name: floor\\nwhen: x > 1.0\\n", Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
"""

_CRON = """
import datetime
from apscheduler.triggers.cron import CronTrigger
_now = datetime.datetime.now(datetime.timezone.utc)
CronTrigger.from_crontab("0 2 * * 6", timezone="UTC").get_next_fire_time(None, _now)
"""

_PROMETHEUS_CLIENT = """
import prometheus_client
_registry = prometheus_client.CollectorRegistry()
prometheus_client.Counter("floor_total", "one counter", registry=_registry).inc()
prometheus_client.generate_latest(_registry)
"""

_SQLITE = """
import sqlite3
_db = sqlite3.connect(":memory:")
_db.execute("CREATE TABLE journal (id INTEGER PRIMARY KEY, entry TEXT)")
_db.execute("INSERT INTO journal (entry) VALUES ('floor')")
"""

_GOVERNOR = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from actuators.kinds import KINDS
from daemon.app.commands import run
from daemon.core.config_files import load_config
from daemon.engine.governor import Governor, LoadedConfig
from daemon.sources.registry import signal_registry
load_config(Path({str(ROOT / "config.example.toml")!r}))
"""

LAYERS: tuple[tuple[str, str], ...] = (
    ("Python, a running asyncio loop (the bare process)", _ASYNCIO),
    ("+ pydantic, one model validated", _PYDANTIC),
    ("+ CEL and its math extension, one expression run", _CEL),
    ("+ PyYAML's C loader, one document", _YAML),
    ("+ APScheduler's cron trigger, one fire time", _CRON),
    ("+ prometheus_client, one counter rendered", _PROMETHEUS_CLIENT),
    ("+ sqlite3, one table", _SQLITE),
    ("+ the modules `vllm-governor run` imports, config loaded", _GOVERNOR),
)
LIBRARY_LAYERS = 7  # the first seven: libraries only

# Each engine runs its expression 1,000 times after the first and prints the milliseconds they
# took: microseconds a run.
_CEL_TIMED = """
import time as _time
_program = _env.compile("math.greatest(x * 0.75, 32.0)")
_started = _time.perf_counter()
for _ in range(1000):
    _program.eval(data={"x": 64.0})
print((_time.perf_counter() - _started) * 1e3)
"""

# The CEL layer's expression, written without the math extension, which cel-python lacks.
_OTHER_CEL = """
import time as _time
import celpy
_environment = celpy.Environment()
_program = _environment.program(_environment.compile("x * 0.75 > 32.0 ? x * 0.75 : 32.0"))
_program.evaluate({"x": celpy.celtypes.DoubleType(64.0)})
_started = _time.perf_counter()
for _ in range(1000):
    _program.evaluate({"x": celpy.celtypes.DoubleType(64.0)})
print((_time.perf_counter() - _started) * 1e3)
"""

_REPORT = """
import gc
gc.collect()
for _line in open("/proc/self/status"):
    if _line.startswith("VmRSS:"):
        print(int(_line.split()[1]))
"""


@dataclass(frozen=True)
class Layer:
    """One layer's resident memory, with everything under it."""

    name: str
    rss_mib: float
    added_mib: float


@dataclass(frozen=True)
class Engine:
    """One CEL engine over the bare loop: what it adds, and one evaluation's cost."""

    name: str
    added_mib: float
    eval_us: float


def rss_mib_with(layers: int) -> float:
    """Median VmRSS (MiB) of a fresh interpreter that ran the first ``layers`` layers."""
    source = "".join(code for _, code in LAYERS[:layers])
    return statistics.median(rss_after(sys.executable, source)[0] for _ in range(RUNS))


def rss_after(python: str, source: str) -> tuple[float, list[float]]:
    """VmRSS (MiB) of ``python`` after running ``source``, and the numbers it printed before."""
    done = subprocess.run(
        [python, "-c", source + _REPORT],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    if done.returncode != 0:
        message = f"{python} failed to run a layer:\n{done.stderr[-2000:]}"
        raise RuntimeError(message)
    numbers = [float(word) for word in done.stdout.split()]
    return numbers[-1] / 1024, numbers[:-1]


def engines(other_python: str) -> list[Engine]:
    """The CEL runtime the governor uses, and cel-python in ``other_python``, side by side."""
    measured = []
    for name, python, code in (
        ("cel-expr-python (C++ runtime)", sys.executable, _CEL + _CEL_TIMED),
        ("cel-python (pure Python)", other_python, _OTHER_CEL),
    ):
        runs = [
            (rss_after(python, _ASYNCIO)[0], rss_after(python, _ASYNCIO + code))
            for _ in range(RUNS)
        ]
        added = statistics.median(rss - bare for bare, (rss, _) in runs)
        eval_us = statistics.median(printed[0] for _, (_, printed) in runs)
        measured.append(Engine(name, round(added, 1), round(eval_us, 2)))
    return measured


def measure() -> list[Layer]:
    """Every layer, cumulative, in order."""
    layers: list[Layer] = []
    below = 0.0
    for count, (name, _) in enumerate(LAYERS, start=1):
        rss = rss_mib_with(count)
        layers.append(Layer(name=name, rss_mib=round(rss, 1), added_mib=round(rss - below, 1)))
        below = rss
    return layers


def main() -> None:
    """Measure the layers and print them beside the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other-cel", help="a Python that has cel-python, to compare with")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    layers = measure()
    bare = layers[0].rss_mib
    print(f"resident memory, cumulative, median of {RUNS} fresh interpreters a layer")
    print(f"{'layer':<60} {'RSS MiB':>8} {'added':>7} {'x bare':>7}")
    for layer in layers:
        print(
            f"{layer.name:<60} {layer.rss_mib:>8.1f} {layer.added_mib:>+7.1f} "
            f"{layer.rss_mib / bare:>6.2f}x"
        )
    floor = layers[LIBRARY_LAYERS - 1].rss_mib
    print(
        f"libraries alone: {floor:.1f} MiB ({floor * 2**20 / 1e6:.1f} MB); goal {GOAL_MIB:.1f} "
        f"MiB (50 MB): {'under' if floor <= GOAL_MIB else 'over'} by {abs(GOAL_MIB - floor):.1f} "
        f"MiB before the governor's own modules and its store"
    )
    compared = engines(args.other_cel) if args.other_cel else []
    for engine in compared:
        print(
            f"{engine.name:<32} adds {engine.added_mib:5.1f} MiB over the bare loop; "
            f"one evaluation {engine.eval_us:7.2f} us "
            f"({engine.eval_us / compared[0].eval_us:.0f}x the C++ runtime's)"
        )
    if args.json:
        document = {
            "goal_mib": GOAL_MIB,
            "layers": [asdict(layer) for layer in layers],
            "cel_engines": [asdict(engine) for engine in compared],
        }
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
