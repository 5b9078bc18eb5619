"""One walk of the imports between the repository's modules, for the tests that hold them to a
shape: tests/test_layers.py (the arrows between packages, and no cycle across packages or
subpackages) and tests/statemachines/test_structure.py (no cycle at all inside the controller).

Every import counts, wherever it is written: at the top, inside a function, or under
``if TYPE_CHECKING:`` (an import moved into a function still makes the modules depend on each
other; it only hides the cycle from the interpreter). ``from a import b`` imports the module
``a.b`` if there is one, else the module ``a`` (a name defined there or re-exported by it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path

__all__ = ["cycles_across", "find_cycle", "import_graph", "imported_names"]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(name: str, path: Path) -> set[str]:
    """Every dotted name the module ``name`` (its file at ``path``) imports, relative imports
    made absolute; for ``from a import b``, ``a.b``."""
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def import_graph(*roots: Path) -> dict[str, set[str]]:
    """Each module under ``roots`` (package directories, or plain directories of scripts) and
    the modules under ``roots`` it imports; imports of anything else are left out."""
    modules = {_module_name(root, p): p for root in roots for p in sorted(root.rglob("*.py"))}
    # C extension modules (their source is ``name.c``): imported like the others, importing
    # nothing of ours
    native = {_module_name(root, p) for root in roots for p in sorted(root.rglob("*.c"))}

    def resolve(name: str) -> str | None:
        while name and name not in modules and name not in native:  # a name imported from
            name = name.rpartition(".")[0]  # a module: the module
        return name or None

    graph = {name: {m for t in imported_names(name, path)
                    if (m := resolve(t)) is not None and m != name}
             for name, path in modules.items()}
    graph.update((name, set()) for name in native)
    return graph


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(m: str) -> list[str] | None:
        path.append(m)
        on_path.add(m)
        for n in sorted(graph.get(m, ())):
            if n in on_path:
                return path[path.index(n):] + [n]
            if n not in done and (cycle := visit(n)) is not None:
                return cycle
        on_path.discard(path.pop())
        done.add(m)
        return None

    for m in sorted(graph):
        if m not in done and (cycle := visit(m)) is not None:
            return cycle
    return None


def cycles_across(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """The import cycles of ``graph`` that join different packages or subpackages, each as one
    line: the cycle, then the imports that make it.

    Seen from outside, a package is one unit: ``a`` and ``b`` import each other when a module
    under ``a`` imports one under ``b`` and a module under ``b`` one under ``a``, even when no
    chain of single modules closes (``a.jobs`` imports ``b.admin`` and ``b.timer`` imports
    ``a.rule``). Inside a package, its own modules (its ``__init__`` among them) are units of
    their own and each subpackage is one unit: a cycle among the package's own modules is the
    package's business (tests/statemachines/test_structure.py holds the controller to none),
    a cycle through one of its subpackages is not. The top-level packages are the units of
    the whole tree."""
    packages = {m.rpartition(".")[0] for m in graph} - {""}  # those with a module in them
    found = []
    for scope in sorted({"", *packages}):
        prefix = f"{scope}." if scope else ""

        def unit(module: str, scope: str = scope, prefix: str = prefix) -> str | None:
            if module == scope:
                return module  # the package's own __init__
            if not module.startswith(prefix):
                return None  # outside this scope
            child = prefix + module[len(prefix):].partition(".")[0]
            return child if child in packages else module

        units: dict[str, set[str]] = {}
        witness: dict[tuple[str, str], tuple[str, str]] = {}
        for importer in sorted(graph):
            if (a := unit(importer)) is None:
                continue
            units.setdefault(a, set())
            for module in sorted(graph[importer]):
                if (b := unit(module)) is not None and b != a:
                    units[a].add(b)
                    witness.setdefault((a, b), (importer, module))
        for component in _strongly_connected(units):
            for sub in sorted(component & packages - {scope}):
                back = min((_shortest_path(units, n, sub, component)
                            for n in units[sub] if n in component), key=lambda p: (len(p), p))
                cycle = [sub, *back]
                imports = [witness[a, b] for a, b in pairwise(cycle)]
                found.append(" -> ".join(cycle) + ": " + ", ".join(
                    f"{u} imports {v}" for u, v in imports))
                break  # one cycle per group of units that import each other
    return found


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            m, successors = work[-1]
            for n in successors:
                if n not in index:
                    index[n] = low[n] = len(index)
                    stack.append(n)
                    on_stack.add(n)
                    work.append((n, iter(sorted(graph.get(n, ())))))
                    break
                if n in on_stack:
                    low[m] = min(low[m], index[n])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[m])
                if low[m] == index[m]:
                    component = set()
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        component.add(n)
                        if n == m:
                            break
                    if len(component) > 1:
                        out.append(component)
    return out


def _shortest_path(graph: Mapping[str, Iterable[str]], start: str, end: str,
                   within: set[str]) -> list[str]:
    """The modules from ``start`` to ``end`` (both included) by the fewest imports."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while end not in previous:
        reached = []
        for m in frontier:
            for n in sorted(graph.get(m, ())):
                if n in within and n not in previous:
                    previous[n] = m
                    reached.append(n)
        frontier = reached
    path: list[str] = []
    node: str | None = end
    while node is not None:
        path.append(node)
        node = previous[node]
    return path[::-1]
