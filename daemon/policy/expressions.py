"""Policy expressions in CEL, Google's Common Expression Language, through its official runtime.

CEL is what Kubernetes and Envoy use for the same job: side-effect free, always terminating,
type-checked before it runs. Expressions are compiled once, when a policy is loaded, against
the declared signals; a typo in a signal name or a comparison of a number with a string is a
load error with its column, never a surprise at 3 a.m.

Signals are declared as ``double``; CEL does not mix ``double`` and ``int`` implicitly, so a
threshold is written ``running > 100.0``, and the error message says so when it is not.
Per-target vLLM signals are plain variables (``kv_usage``); host and GPU series are maps keyed
by their identifying label (``host_disk_usage_ratio["/var/log"]``, ``gpu_temperature_celsius
["0"]``). Action expressions also see ``current``, the knob's value. The standard ``math``
extension gives ``math.greatest`` and ``math.least``.

An expression that references a signal without fresh data is not evaluated at all: its result
is *no data*, and the policy's ``on_no_data`` decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cel_expr_python.cel as cel  # noqa: PLR0402 - mypy needs the module path (no py.typed)
import cel_expr_python.ext.ext_math as ext_math  # noqa: PLR0402 - same

from daemon.policy.knob_signals import KNOB_SIGNALS
from daemon.sources.catalogue import CATALOGUE

# Series of other sources that policies may read, and the label that keys their map.
MAP_SIGNALS: Mapping[str, str] = {
    "host_disk_usage_ratio": "path",
    "host_disk_available_bytes": "path",
    "gpu_temperature_celsius": "gpu",
    "gpu_power_watts": "gpu",
    "gpu_power_limit_watts": "gpu",
    "gpu_utilization_ratio": "gpu",
    "gpu_throttle_reasons_bitmask": "gpu",
    "gpu_xid_errors_total": "gpu",
    "gpu_ecc_uncorrected_errors_total": "gpu",
}
SCALAR_SIGNALS = (
    frozenset(CATALOGUE)
    | frozenset(KNOB_SIGNALS)
    | {
        "host_load1",
        "host_load5",
        "host_load15",
        "host_cpu_count",
    }
)
CURRENT = "current"

_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)")
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_CEL_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")
_MIXED_NUMBERS = re.compile(r"applied to '\((double, int|int, double)\)'")


class ExpressionError(ValueError):
    """An expression does not compile; ``column`` is 1-based within the expression."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled, type-checked CEL expression and the signals it reads."""

    source: str
    program: Any
    signals: frozenset[str]
    result_type: str

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """Run with ``values`` for every referenced name.

        Raises:
            ExpressionError: the evaluation failed (division by zero, a missing map key...).
        """
        result = self.program.eval(data=dict(values))
        if result.type() == cel.Type.ERROR:
            message = f"{self.source}: {result.plain_value()}"
            raise ExpressionError(message)
        return result.plain_value()


def _environment(with_current: bool) -> Any:
    variables = dict.fromkeys(SCALAR_SIGNALS, cel.Type.DOUBLE)
    variables |= {name: cel.Type.Map(cel.Type.STRING, cel.Type.DOUBLE) for name in MAP_SIGNALS}
    if with_current:
        variables[CURRENT] = cel.Type.DOUBLE
    return cel.NewEnv(variables=variables, extensions=[ext_math.ExtMath()])


_CONDITIONS = _environment(with_current=False)
_ACTIONS = _environment(with_current=True)


def compile_condition(source: str) -> Expression:
    """Compile a ``when`` or ``clear`` condition; it must be a boolean."""
    expression = _compile(_CONDITIONS, source)
    if expression.result_type != "bool":
        message = f"a condition must be true or false, but this is a {expression.result_type}"
        raise ExpressionError(message)
    return expression


def compile_action(source: str) -> Expression:
    """Compile a knob's new value; it must be a number (or a boolean for on/off knobs)."""
    expression = _compile(_ACTIONS, source)
    if expression.result_type not in ("double", "int", "uint", "bool", "dyn"):
        message = (
            f"a knob's new value must be a number or a boolean, not a {expression.result_type}"
        )
        raise ExpressionError(message)
    return expression


def _compile(environment: Any, source: str) -> Expression:
    try:
        program = environment.compile(source)
    except RuntimeError as exc:
        raise _translate(str(exc)) from None
    return Expression(source, program, _references(source), program.return_type().name().lower())


def _references(source: str) -> frozenset[str]:
    """Declared names the expression mentions (string literals excluded)."""
    code = _STRINGS.sub("''", source)
    names = set(_IDENTIFIER.findall(code))
    return frozenset(names & (SCALAR_SIGNALS | set(MAP_SIGNALS) | {CURRENT}))


def _translate(message: str) -> ExpressionError:
    """CEL's first error, with its position, plus a hint for the usual int/double slip."""
    match = _CEL_POSITION.search(message)
    if match is None:
        return ExpressionError(message.strip().splitlines()[0])
    line, column, text = int(match.group(1)), int(match.group(2)), match.group(3).strip()
    if text.startswith("undeclared reference to"):
        name = text.split("'")[1]
        text = f"unknown signal or function {name!r} (see `vllm-governor signals` for names)"
    elif _MIXED_NUMBERS.search(text):
        text += "; signals are doubles: write thresholds with a decimal point (100.0, not 100)"
    return ExpressionError(text, line, column)
