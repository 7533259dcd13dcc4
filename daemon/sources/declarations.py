"""What a source says it produces: the signals policies may read, declared, not guessed.

Each kind of source declares its signals: the built-in ones (vLLM, its HAProxy gate, NVML, the
host) in their own modules, the configured ones (Prometheus queries, MQTT subscriptions) from
the configuration that names them. A :class:`SignalRegistry` gathers the declarations of one
configuration; the policy language compiles its expressions against it, so that a signal
configured in ``config.toml`` is a name a policy may use, and a typo is still a load error.

A signal is a *scalar* (one number: ``running``, ``cluster_queue_depth``) or a *map* keyed by
one label (``gpu_temperature_celsius["0"]``, keyed by ``gpu``). Per-target signals (vLLM's
and its gate's) are read for each target; the others are shared by every target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from daemon.sources.domains import Domain, unit_domain

# A name a policy can write: a CEL identifier that is not one of CEL's reserved words.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "namespace",
        "null",
        "package",
        "return",
        "true",
        "var",
        "void",
        "while",
    ]
)
# Prometheus' base units, read from a name's last word (its naming convention).
_UNITS = {
    "seconds": "seconds",
    "s": "seconds",
    "bytes": "bytes",
    "ratio": "ratio",
    "celsius": "celsius",
    "watts": "watts",
    "total": "count",
    "bitmask": "bitmask",
}


@dataclass(frozen=True, slots=True)
class SignalDeclaration:
    """One signal a source produces.

    Attributes:
        name: The name policies use (``kv_usage``, ``cluster_queue_depth``).
        source: The kind of source that produces it (``vllm``, ``haproxy``, ``nvml``,
            ``host``, ``prometheus``, ``mqtt``).
        help: One line for people.
        unit: Its unit (``seconds``, ``ratio``...), "" when it has none or it is unknown.
        key: The label that keys a map signal; None for a scalar.
        per_target: Read for each vLLM target (vLLM's own and its gate's), not shared.
        declared_domain: The values it can plausibly take; None: those of its unit
            (:func:`daemon.sources.domains.unit_domain`), at least a finite number.
    """

    name: str
    source: str
    help: str
    unit: str = ""
    key: str | None = None
    per_target: bool = False
    declared_domain: Domain | None = None

    @property
    def domain(self) -> Domain:
        """Its domain: the declared one, else its unit's."""
        return self.declared_domain or unit_domain(self.unit)

    @property
    def shape(self) -> str:
        """``map`` (keyed by ``key``) or ``scalar``."""
        return "scalar" if self.key is None else "map"

    def as_json(self) -> dict[str, str | bool | None]:
        """The declaration as ``vllm-governor schema --signals`` prints it."""
        return {
            "name": self.name,
            "source": self.source,
            "shape": self.shape,
            "key": self.key,
            "unit": self.unit,
            "per_target": self.per_target,
            "domain": self.domain.describe(),
            "help": self.help,
        }


class SignalConflict(ValueError):
    """Two declarations want the same name.

    Attributes:
        key_path: Where the offending name is configured (``sources.prometheus.queries.x``).
    """

    def __init__(self, message: str, key_path: str) -> None:
        super().__init__(message)
        self.key_path = key_path


@dataclass(frozen=True, slots=True)
class SignalRegistry:
    """Every signal of one configuration, by name; immutable and hashable.

    Build it with :meth:`of`, which refuses two declarations of one name.
    """

    declarations: tuple[SignalDeclaration, ...]
    _by_name: Mapping[str, SignalDeclaration] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        by_name = {declaration.name: declaration for declaration in self.declarations}
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))

    @classmethod
    def of(cls, groups: Iterable[tuple[str, Iterable[SignalDeclaration]]]) -> SignalRegistry:
        """The registry of ``(key path, declarations)`` groups, in order.

        A configured name that a policy cannot write (``job:requests:rate5m``, a recording
        rule's name) is left out: its series still show in ``vllm-governor signals``.

        Raises:
            SignalConflict: a name is declared twice.
        """
        seen: dict[str, SignalDeclaration] = {}
        for key_path, declarations in groups:
            for declaration in declarations:
                if not usable_name(declaration.name):
                    continue
                _refuse_conflict(declaration, seen.get(declaration.name), key_path)
                seen[declaration.name] = declaration
        return cls(tuple(seen.values()))

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is declared."""
        return name in self._by_name

    def __iter__(self) -> Iterator[SignalDeclaration]:
        """The declarations, in order."""
        return iter(self.declarations)

    def get(self, name: str) -> SignalDeclaration | None:
        """The declaration of ``name``, if any."""
        return self._by_name.get(name)

    def names(self) -> frozenset[str]:
        """Every declared name."""
        return frozenset(self._by_name)

    def map_keys(self) -> dict[str, str]:
        """Map signal -> the label that keys it."""
        return {d.name: d.key for d in self.declarations if d.key is not None}

    def shared_scalars(self) -> frozenset[str]:
        """Scalars shared by every target (not vLLM's own, read per target)."""
        return frozenset(d.name for d in self.declarations if d.key is None and not d.per_target)


def usable_name(name: str) -> bool:
    """Whether a policy can write ``name`` (a CEL identifier, not a reserved word)."""
    return bool(_IDENTIFIER.match(name)) and name not in _RESERVED


def unit_of(name: str) -> str:
    """The unit a name says by Prometheus' convention (``..._celsius``), else ""."""
    if name.endswith("_per_s"):
        return "per second"
    return _UNITS.get(name.rsplit("_", 1)[-1], "")


def _refuse_conflict(
    declaration: SignalDeclaration, earlier: SignalDeclaration | None, key_path: str
) -> None:
    if earlier is None:
        return
    if earlier.source == declaration.source == "mqtt" and earlier.key == declaration.key:
        return  # several topics may feed one signal, keyed alike
    message = (
        f"signal {declaration.name!r} is already declared by the {earlier.source} source; "
        "choose another name"
    )
    raise SignalConflict(message, key_path)
