"""groove_core's modules import one another without a cycle, and the storage rooms keep
their doors: only the SQLite wing (``groove_core.sqlite``) speaks SQLite, and the PostgreSQL
plugin builds on the storage contract alone.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a cycle
that only a lazy import hides still ties the modules together (a change to one breaks the
other's import order). Found with :mod:`ast`, without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import groove_core

PACKAGE = "groove_core"
ROOT = Path(groove_core.__file__).resolve().parent
#: The SQLite wing: the built-in backend, its store and their SQL.
SQLITE_WING = "groove_core.sqlite"
#: The one door into the wing: the plugin manager registers its backend with the built-ins.
WING_DOORS = {"groove_core.plugins": {"groove_core.sqlite.backend"}}
#: The PostgreSQL plugin's package.
POSTGRES = ROOT.parent / "plugins" / "groove_postgres" / "groove_postgres"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    # A package's relative imports start from the package itself, a module's from its parent.
    drop = node.level - 1 if is_package else node.level
    anchor = base[: len(base) - drop] if drop else base
    return ".".join([*anchor, *([node.module] if node.module else [])])


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def add(name: str) -> None:
        # `import a.b.c` imports a.b.c (its parents run first, but a package's __init__
        # importing its own modules is not a cycle worth reporting).
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, is_package)
            for alias in node.names:
                # `from pkg import mod` imports the module pkg.mod when there is one.
                sub = f"{target}.{alias.name}"
                add(sub if sub in known else target)
    out.discard(module)
    return {m for m in out if m == PACKAGE or m.startswith(PACKAGE + ".")}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan): each module of
    one can reach every other, so each lies on a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(set(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per tangle, as a path of modules."""
    return [_cycle_in(graph, members) for members in tangles(graph)]


def _cycle_in(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a readable path."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return sorted(members)  # unreachable for a strongly connected component


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "groove_core" / "pkg"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("from . import a\n", encoding="utf-8")
    (source / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from groove_core.pkg.b import B\n"
        "def f():\n    from .c import x\n",
        encoding="utf-8",
    )
    known = {"groove_core", "groove_core.pkg", "groove_core.pkg.a", "groove_core.pkg.b"}
    known.add("groove_core.pkg.c")
    assert imports_of("groove_core.pkg", source / "__init__.py", known) == {"groove_core.pkg.a"}
    assert imports_of("groove_core.pkg.a", source / "a.py", known) == {
        "groove_core.pkg.b",
        "groove_core.pkg.c",
    }


def test_cycles_are_found_and_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_groove_core_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 30  # the walk found the package
    found = tangles(graph)
    assert not found, "import cycles in groove_core:\n" + "\n".join(
        " -> ".join(_cycle_in(graph, members))
        + (f"\n  (modules tied in it: {', '.join(sorted(members))})" if len(members) > 2 else "")
        for members in found
    )


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_only_the_sqlite_wing_imports_it() -> None:
    graph = import_graph()
    assert f"{SQLITE_WING}.store" in graph and f"{SQLITE_WING}.backend" in graph
    strays = {
        module: sorted(
            d for d in deps if _in(d, SQLITE_WING) and d not in WING_DOORS.get(module, ())
        )
        for module, deps in graph.items()
        if not _in(module, SQLITE_WING)
    }
    strays = {m: d for m, d in strays.items() if d}
    assert not strays, f"modules outside {SQLITE_WING} import it: {strays}"


#: What speaking SQLite takes: its drivers, and FTS5 statements.
SQLITE_MODULES = {"sqlite3", "pysqlite3", "sqlite_vec"}
FTS5_MARKS = ("fts5", " MATCH ?")


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_sqlite_wing_speaks_sqlite() -> None:
    speakers = sorted(
        name
        for name, path in _modules().items()
        if not _in(name, SQLITE_WING)
        and (
            _top_level_imports(path) & SQLITE_MODULES
            or any(mark in path.read_text(encoding="utf-8") for mark in FTS5_MARKS)
        )
    )
    assert not speakers, f"modules outside {SQLITE_WING} speak SQLite or FTS5: {speakers}"


def test_the_postgres_plugin_builds_on_the_contract_alone() -> None:
    known = set(_modules())
    modules = sorted(POSTGRES.glob("*.py"))
    assert len(modules) > 5  # the walk found the plugin
    strays = {}
    for path in modules:
        name = f"groove_postgres.{path.stem}"
        bad = sorted(
            m
            for m in imports_of(name, path, known)
            if _in(m, SQLITE_WING) or _in(m, "groove_core.builtins")
        )
        if bad:
            strays[name] = bad
    assert not strays, f"the PostgreSQL plugin imports the SQLite wing or a built-in leg: {strays}"


#: The front-ends, and what alone may import each (docs/architecture.md): the console
#: script and the docs generator start the CLI; only the CLI starts the MCP server.
FRONT_ENDS = {
    f"{PACKAGE}.cli": {f"{PACKAGE}.__main__", f"{PACKAGE}.docgen"},
    f"{PACKAGE}.mcp": {f"{PACKAGE}.cli"},
}


def test_the_core_imports_no_front_end() -> None:
    graph = import_graph()
    strays = {
        module: sorted(m for m in imported if _in(m, room))
        for room, doors in FRONT_ENDS.items()
        for module, imported in graph.items()
        if not _in(module, room)
        and not any(_in(module, door) for door in doors)
        and any(_in(m, room) for m in imported)
    }
    assert not strays, f"the core imports a front-end: {strays}"
