"""Policy expressions in CEL, Google's Common Expression Language, through its official runtime.

CEL is what Kubernetes and Envoy use for the same job: side-effect free, always terminating,
type-checked before it runs. Expressions are compiled once, when a policy is loaded, against
the signals the configuration declares (:mod:`daemon.sources.registry`: the built-in sources'
signals, Prometheus queries, MQTT subscriptions); a typo in a signal name or a comparison of a
number with a string is a load error with its column, never a surprise at 3 a.m.

Signals are declared as ``double``; CEL does not mix ``double`` and ``int`` implicitly, so a
threshold is written ``running > 100.0``, and the error message says so when it is not.
Scalar signals are plain variables (``kv_usage``, ``cluster_queue_depth``); map signals are
keyed by their identifying label (``host_disk_usage_ratio["/var/log"]``,
``gpu_temperature_celsius["0"]``). Action expressions also see ``current``, the knob's value.
The standard ``math`` extension gives ``math.greatest`` and ``math.least``.

Running an expression ends one of three ways besides a value:

* *no data* (:class:`MissingData`): a signal or map key it needed has no fresh value; the
  policy's ``on_no_data`` decides.
* *error* (:class:`EvaluationError`): the expression itself failed (an integer division by
  zero, CEL's iteration budget exceeded); the policy holds and shows the error.

CEL stops a run after ``ITERATION_BUDGET`` comprehension steps in all. An expression with a
comprehension is run once when compiled, without data (as at start, before the first scrape):
when that already exceeds the budget, it is a load error rather than a policy that never works.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cel_expr_python.cel as cel  # noqa: PLR0402 - mypy needs the module path (no py.typed)
import cel_expr_python.ext.ext_math as ext_math  # noqa: PLR0402 - same

from daemon.sources.declarations import SignalRegistry
from daemon.sources.registry import BUILTIN

CURRENT = "current"
# cel-cpp's default limit on comprehension steps in one run (measured: 9,999 pass, 10,000 fail).
ITERATION_BUDGET = 10_000

_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)")
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_CEL_POSITION = re.compile(r"<input>:(\d+):(\d+): (.*)")
_MIXED_NUMBERS = re.compile(r"applied to '\((double, int|int, double)\)'")
_COMPREHENSION = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(")
# How CEL says that a variable or a map key is absent: no data, not an error.
_MISSING = ("No value with name", "Key not found in map")
_BUDGET = "budget exceeded"


class ExpressionError(ValueError):
    """An expression does not compile or run; ``column`` is 1-based within the expression."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class MissingData(ExpressionError):
    """A run needed a signal (or a map key) that has no fresh value: *no data*."""


class EvaluationError(ExpressionError):
    """A run failed on its own account (division by zero, CEL's budget): an *error*."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled, type-checked CEL expression and the signals it reads."""

    source: str
    program: Any
    signals: frozenset[str]
    result_type: str

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """Run with ``values`` for every referenced name that has one.

        Raises:
            MissingData: a name or map key it needed has no value.
            EvaluationError: the run failed otherwise (division by zero, CEL's budget...).
        """
        try:
            result = self.program.eval(data=dict(values))
        except RuntimeError as exc:  # cel-cpp raises, rather than returns, a budget overrun
            raise _evaluation_error(self.source, str(exc)) from None
        if result.type() == cel.Type.ERROR:
            text = str(result.plain_value())
            if any(marker in text for marker in _MISSING):
                message = f"{_shortened(self.source)}: {text}"
                raise MissingData(message)
            raise _evaluation_error(self.source, text)
        return result.plain_value()


class Compiler:
    """CEL environments for one signal registry: conditions, and actions (with ``current``)."""

    def __init__(self, signals: SignalRegistry) -> None:
        self.signals = signals
        self._names = signals.names() | {CURRENT}
        self._conditions = _environment(signals, with_current=False)
        self._actions = _environment(signals, with_current=True)

    def condition(self, source: str) -> Expression:
        """Compile a ``when`` or ``clear`` condition; it must be a boolean."""
        expression = self._compile(self._conditions, source)
        if expression.result_type != "bool":
            message = f"a condition must be true or false, but this is a {expression.result_type}"
            raise ExpressionError(message)
        return expression

    def action(self, source: str) -> Expression:
        """Compile a knob's new value; it must be a number (or a boolean for on/off knobs)."""
        expression = self._compile(self._actions, source)
        if expression.result_type not in ("double", "int", "uint", "bool", "dyn"):
            message = (
                f"a knob's new value must be a number or a boolean, not a {expression.result_type}"
            )
            raise ExpressionError(message)
        return expression

    def _compile(self, environment: Any, source: str) -> Expression:
        try:
            program = environment.compile(source)
        except RuntimeError as exc:
            raise _translate(str(exc)) from None
        result_type = program.return_type().name().lower()
        expression = Expression(source, program, self._references(source), result_type)
        _refuse_budget_overrun(expression)
        return expression

    def _references(self, source: str) -> frozenset[str]:
        """Declared names the expression mentions (string literals excluded)."""
        code = _STRINGS.sub("''", source)
        return frozenset(set(_IDENTIFIER.findall(code)) & self._names)


@functools.lru_cache(maxsize=16)
def compiler(signals: SignalRegistry = BUILTIN) -> Compiler:
    """The compiler of ``signals`` (built once per registry: an environment costs a few ms)."""
    return Compiler(signals)


def compile_condition(source: str, signals: SignalRegistry = BUILTIN) -> Expression:
    """Compile a ``when`` or ``clear`` condition against ``signals``; it must be a boolean."""
    return compiler(signals).condition(source)


def compile_action(source: str, signals: SignalRegistry = BUILTIN) -> Expression:
    """Compile a knob's new value against ``signals``; a number (or a boolean)."""
    return compiler(signals).action(source)


def _environment(signals: SignalRegistry, *, with_current: bool) -> Any:
    keyed = signals.map_keys()
    number, by_key = cel.Type.DOUBLE, cel.Type.Map(cel.Type.STRING, cel.Type.DOUBLE)
    variables = {d.name: by_key if d.name in keyed else number for d in signals}
    if with_current:
        variables[CURRENT] = cel.Type.DOUBLE
    return cel.NewEnv(variables=variables, extensions=[ext_math.ExtMath()])


def _refuse_budget_overrun(expression: Expression) -> None:
    """A comprehension that exceeds CEL's budget without data will not do better with it.

    Without data, every comprehension's body is an error, which stops neither ``all`` nor
    ``exists``: each runs to its end, so this run is the longest the ranges allow (those
    over literal lists, the usual culprit).
    """
    if not _COMPREHENSION.search(_STRINGS.sub("''", expression.source)):
        return
    try:
        expression.evaluate({})
    except EvaluationError as exc:
        if _BUDGET in str(exc):
            message = (
                f"its comprehensions take more than CEL's budget of {ITERATION_BUDGET:,} "
                "steps in all (nested loops multiply: 100 x 100 is already too many); "
                "loop over fewer values"
            )
            raise ExpressionError(message) from None
    except ExpressionError:
        pass  # no data, as expected without data


def _evaluation_error(source: str, text: str) -> EvaluationError:
    if _BUDGET in text.lower():
        text = f"CEL's iteration budget exceeded (over {ITERATION_BUDGET:,} comprehension steps)"
    return EvaluationError(f"{_shortened(source)}: {text}")


def _shortened(source: str, limit: int = 80) -> str:
    """The expression as messages quote it: a long literal list need not fill the log."""
    return source if len(source) <= limit else source[: limit - 1] + "…"


def _translate(message: str) -> ExpressionError:
    """CEL's first error, with its position, plus a hint for the usual int/double slip."""
    match = _CEL_POSITION.search(message)
    if match is None:
        return ExpressionError(message.strip().splitlines()[0])
    line, column, text = int(match.group(1)), int(match.group(2)), match.group(3).strip()
    if text.startswith("undeclared reference to"):
        name = text.split("'")[1]
        text = (
            f"unknown signal or function {name!r} (`vllm-governor schema --signals --config "
            "config.toml` lists the names, configured Prometheus and MQTT signals included)"
        )
    elif _MIXED_NUMBERS.search(text):
        text += "; signals are doubles: write thresholds with a decimal point (100.0, not 100)"
    return ExpressionError(text, line, column)
