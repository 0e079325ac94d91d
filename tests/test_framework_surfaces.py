"""Only documented framework surfaces: the project's code imports no private name or private
module of a framework or library, assigns no attribute of a class or module it imported from one
(no monkeypatching), writes no private attribute of an object that is not its own, and leaves
Python's garbage collector as it is (no ``gc.freeze``, ``set_threshold`` or ``disable`` in a
process: docs/benchmarks.md measures what that costs the relayed league).

Read from the source text, so a patch hidden inside a function fails here too. Each rule has a
test that feeds it a snippet breaking it.
"""

from __future__ import annotations

import ast

from tests.test_imports import modules

# Top-level packages whose private parts the project must not touch: the frameworks and the
# libraries it is built on.
THIRD_PARTY = (
    "django",
    "channels",
    "channels_redis",
    "daphne",
    "uvicorn",
    "rest_framework",
    "drf_spectacular",
    "asgiref",
    "whitenoise",
    "aiohttp",
    "httpx",
    "pydantic",
    "mcp",
    "redis",
    "psycopg",
    "google",
    "rich",
)
# Public by their documentation but not by their spelling: none today. Undocumented helpers
# with public spellings that were once used in place of Django's own checks.
UNDOCUMENTED = {
    ("django.http.request", "split_domain_port"),
    ("django.http.request", "validate_host"),
}
GC_TUNING = {"freeze", "unfreeze", "set_threshold", "disable"}


def _third_party(module: str) -> bool:
    return module.split(".")[0] in THIRD_PARTY


def _private_module(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _attribute_chain(node: ast.expr) -> list[str]:
    names = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return names[::-1]


def _others(root: ast.expr, chain: list[str]) -> list[str]:
    """The attributes of ``chain`` that belong to some other object than the one written from:
    all of them, but for ``self``'s or ``cls``'s own first one."""
    own = isinstance(root, ast.Name) and root.id in ("self", "cls")
    return chain[1:] if own else chain


def problems(source: str, where: str = "<snippet>") -> list[str]:
    """What in ``source`` breaks the rules above, one line each."""
    tree = ast.parse(source, where)
    found: list[str] = []
    imported: set[str] = set()  # names bound to something of a third-party package
    gc_names: set[str] = set()  # names bound to the gc module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if alias.name == "gc":
                    gc_names.add(bound)
                if _third_party(alias.name):
                    imported.add(bound)
                    if _private_module(alias.name):
                        found.append(f"{where}:{node.lineno}: imports the private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "gc":
                for alias in node.names:
                    if alias.name in GC_TUNING:
                        found.append(f"{where}:{node.lineno}: imports gc.{alias.name}")
            if not _third_party(node.module):
                continue
            if _private_module(node.module):
                found.append(f"{where}:{node.lineno}: imports from the private module {node.module}")
            for alias in node.names:
                imported.add(alias.asname or alias.name)
                if alias.name.startswith("_") or (node.module, alias.name) in UNDOCUMENTED:
                    found.append(f"{where}:{node.lineno}: imports {node.module}.{alias.name}, not a documented name")
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            root = _root(node.args[0])
            if isinstance(root, ast.Name) and root.id in imported:
                found.append(f"{where}:{node.lineno}: {node.func.id} on {root.id}, imported from a library")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if isinstance(base, ast.Name) and base.id in gc_names and node.func.attr in GC_TUNING:
                found.append(f"{where}:{node.lineno}: gc.{node.func.attr}() changes the collector of the process")
        for target in targets:
            if not isinstance(target, ast.Attribute | ast.Subscript):
                continue
            root = _root(target)
            chain = _attribute_chain(target)
            if isinstance(root, ast.Name) and root.id in imported and chain:
                found.append(f"{where}:{node.lineno}: assigns {root.id}.{'.'.join(chain)}, a library's attribute")
            elif any(name.startswith("_") and not name.startswith("__") for name in _others(root, chain)):
                # Writing a private attribute of another object, or through one
                # (``obj._state.adding``, ``self.stdout._out``): its owner's business. An
                # object's own private attributes (``self._x = …``) are its own.
                found.append(f"{where}:{node.lineno}: writes through {'.'.join(chain)}, another object's private part")
    return found


def test_the_project_uses_only_documented_framework_surfaces():
    found = [line for name, path in sorted(modules().items()) for line in problems(path.read_text(), str(path))]
    assert not found, "\n".join(found)


def test_a_private_import_is_seen():
    assert problems("from django.http.request import split_domain_port")
    assert problems("from channels.consumer import _private")
    assert problems("from django.utils._os import safe_join")
    assert problems("import asgiref._pep562")
    assert not problems("from django.http import HttpRequest\nfrom league.models import _helper")


def test_a_patched_framework_attribute_is_seen():
    assert problems("from channels.consumer import AsyncConsumer\nAsyncConsumer.dispatch = None")
    assert problems("import django\ndef f():\n    django.http.request.host_validation_re = None")
    assert problems("from django.conf import settings\nsetattr(settings, 'DEBUG', True)")
    assert problems("def f(self):\n    self.stdout._out = None")
    assert problems("def f(obj):\n    obj._state.adding = False")
    assert not problems("class A:\n    def f(self):\n        self._x = 1\n        self.y = 2")


def test_tuning_the_garbage_collector_is_seen():
    assert problems("import gc\ngc.freeze()")
    assert problems("import gc as g\ng.set_threshold(20000)")
    assert problems("from gc import disable")
    assert not problems("import gc\ngc.collect()")
