"""The import graph of the product: packages, their layers, and the cycles between them (none).

Builds the graph of ``daemon``, ``actuators`` and ``simulator`` with grimp (the library
import-linter checks its contracts with), folds modules into packages, and prints, for each
package, the layer its import-linter contract puts it in, its modules and the packages it
imports. Then it counts what would make the graph a tangle: *two-way edges* (package A imports
B, directly, and B imports A) and *cycles* (strongly connected groups of more than one package,
however long the loop), and the same at module level. The contracts in ``pyproject.toml``
forbid both; this prints the figures the closing note of issue 14 asks for.

    .venv/bin/python -m bench.import_graph [--json]
"""

from __future__ import annotations

import argparse
import json
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("daemon", "actuators", "simulator")
# The packages the graph is folded into: each subpackage of these, each of their modules.
FOLDED_UNDER = ("daemon", "daemon.engine", "actuators", "simulator")


def package_of(module: str, packages: Iterable[str]) -> str:
    """The deepest of ``packages`` that holds ``module`` (itself when it is one)."""
    best = module.split(".", maxsplit=1)[0]
    for package in packages:
        if (module == package or module.startswith(f"{package}.")) and len(package) > len(best):
            best = package
    return best


def packages_of(graph: grimp.ImportGraph) -> list[str]:
    """The nodes of the folded graph: each child of :data:`FOLDED_UNDER`, none of them."""
    children = {
        child
        for parent in FOLDED_UNDER
        for child in graph.find_children(parent)
        if child not in FOLDED_UNDER
    }
    return sorted(children)


def layers() -> dict[str, str]:
    """Package -> where its import-linter contract puts it ("daemon layers, 2 of 9").

    A package of a ``forbidden`` contract's ``source_modules`` (``actuators``, ``simulator``)
    is named with that contract, for the packages under it.
    """
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    placed: dict[str, str] = {}
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "forbidden":
            for package in contract["source_modules"]:
                placed.setdefault(package, contract["name"])
        if contract["type"] != "layers":
            continue
        title = contract["name"].split(":")[0]
        total = len(contract["layers"])
        for index, layer in enumerate(contract["layers"], start=1):
            for package in layer.split("|"):
                placed.setdefault(package.strip(), f"{title}, {index} of {total}")
    return placed


def layer_of(package: str, placed: Mapping[str, str]) -> str:
    """The layer of ``package``, or of the nearest package above it that has one."""
    parts = package.split(".")
    for depth in range(len(parts), 0, -1):
        if (name := ".".join(parts[:depth])) in placed:
            return placed[name]
    return ""


def edges(graph: grimp.ImportGraph, nodes: list[str]) -> dict[str, set[str]]:
    """Direct imports between different folded packages."""
    folded: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        source = package_of(module, nodes)
        for imported in graph.find_modules_directly_imported_by(module):
            target = package_of(imported, nodes)
            if target != source and target.split(".")[0] in ROOTS:
                folded[source].add(target)
    return folded


def two_way(graph: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs that import each other directly."""
    return sorted(
        (a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ())
    )


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {b for targets in graph.values() for b in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def module_graph(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Direct imports between modules (a package's ``__init__`` is its own module)."""
    return {
        module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }


def main() -> None:
    """Print the folded graph, then the counts of two-way edges and cycles."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    graph = grimp.build_graph(*ROOTS)
    nodes = packages_of(graph)
    folded = edges(graph, nodes)
    modules = module_graph(graph)
    placed = layers()
    packages = {
        package: {
            "layer": layer_of(package, placed),
            "modules": sum(1 for m in graph.modules if package_of(m, nodes) == package),
            "imports": sorted(folded.get(package, set())),
        }
        for package in nodes
    }
    counts: dict[str, list[tuple[str, str]] | list[list[str]]] = {
        "two-way edges between packages": two_way(folded),
        "cycles between packages": cycles(folded),
        "two-way edges between modules": two_way(modules),
        "cycles between modules": cycles(modules),
    }
    if args.json:
        print(json.dumps({"packages": packages, "modules": len(graph.modules), **counts}, indent=2))
        return
    for package, facts in packages.items():
        print(f"{package:30} {facts['modules']:>3} modules  {facts['layer']}")
    print(f"packages: {len(nodes)}, modules: {len(graph.modules)}")
    for what, found in counts.items():
        print(f"{what}: {len(found)}", *found)


if __name__ == "__main__":
    main()
