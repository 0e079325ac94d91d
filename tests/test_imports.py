"""The shape of the code: no import cycles between modules or between packages, and the agents
stay apart from the League Manager.

Read from the source text (every ``import`` and ``from … import``, at module level or inside a
function, TYPE_CHECKING blocks included), so a cycle hidden behind a late import fails here too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("leagueproto", "league", "referee", "players", "leaguesite")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports by name (a package's own submodules it merely passes
    through on the way are not counted: importing ``a.b.c`` runs ``a.b`` but does not use it)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
    return {t for t in targets if t in known and t != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
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
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(graph()) == []


def package_of(name: str, known: dict[str, Path]) -> str:
    """The package a module belongs to (a package is its own)."""
    return name if known[name].name == "__init__.py" else name.rpartition(".")[0]


def package_graph(modules_graph: dict[str, set[str]], known: dict[str, Path]) -> dict[str, set[str]]:
    """Which package imports which, through any of their modules. A package and the packages
    inside it are one subtree, not a cycle: ``league.models`` is imported from ``league.mcp``
    and ``league.apps`` names its subpackages."""
    packages: dict[str, set[str]] = defaultdict(set)
    for name, targets in modules_graph.items():
        source = package_of(name, known)
        packages[source]
        for target in targets:
            other = package_of(target, known)
            if not (source == other or other.startswith(f"{source}.") or source.startswith(f"{other}.")):
                packages[source].add(other)
                packages[other]
    return dict(packages)


def test_no_package_imports_one_that_imports_it_back():
    """``league.mcp`` and ``league.relay`` say what they are for only when one may lean on the
    other and not both ways."""
    known = modules()
    assert cycles(package_graph(graph(), known)) == []


def test_a_package_cycle_is_seen_through_any_of_its_modules():
    known = {name: Path(f"{name.replace('.', '/')}.py") for name in ("a.b.x", "a.b.y", "a.c.z")}
    assert cycles(package_graph({"a.b.x": {"a.c.z"}, "a.b.y": set(), "a.c.z": {"a.b.y"}}, known)) == [["a.b", "a.c"]]
    assert cycles(package_graph({"a.b.x": {"a.c.z"}, "a.b.y": set(), "a.c.z": set()}, known)) == []


def test_the_cycle_finder_sees_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_agents_and_the_protocol_package_never_import_the_league_manager():
    for name, targets in graph().items():
        top = name.split(".")[0]
        if top in ("referee", "players", "leagueproto"):
            assert not {t for t in targets if t.split(".")[0] in ("league", "leaguesite")}, name
        if top == "leagueproto":
            assert not {t for t in targets if t.split(".")[0] in ("referee", "players")}, name


def test_every_package_of_the_project_is_looked_at():
    """A new top-level package (a ``pages/`` app, say) is covered by the rules above too."""
    found = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert found == set(PACKAGES)
