"""The shape of the package's imports, read statically from its source: no circles, and the layers at the bottom
stay there.

Every import a module can execute counts: at module level, in classes and inside functions (a lazy import is
still an edge, and a circle held together by one is still a circle). Importing `a.b.c` also runs the packages
`a` and `a.b`, so an import is an edge to each package on the way. Only imports under `if TYPE_CHECKING:` are
left out: they never run.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "constructs" / "kubetrain"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported_names(tree: ast.AST) -> set[str]:
    """Dotted names of what `tree` can import, TYPE_CHECKING blocks aside."""
    names: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                pending.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names.add(child.module)
                names.update(f"{child.module}.{alias.name}" for alias in child.names)
            pending.append(child)
    return names


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the package's modules that importing it can run (their packages included)."""
    known = modules()
    graph = {}
    for name, path in known.items():
        edges = set()
        for imported in _imported_names(ast.parse(path.read_text())):
            parts = imported.split(".")
            edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in known)
        edges.discard(name)
        graph[name] = frozenset(edges)
    return graph


def circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for edge in edges:
                if edge not in index:
                    index[edge] = low[edge] = len(index)
                    stack.append(edge)
                    on_stack.add(edge)
                    work.append((edge, iter(sorted(graph[edge]))))
                    break
                if edge in on_stack:
                    low[node] = min(low[node], index[edge])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def reachable(start: str) -> set[str]:
    seen, pending = set(), [start]
    while pending:
        for edge in import_graph()[pending.pop()]:
            if edge not in seen:
                seen.add(edge)
                pending.append(edge)
    return seen


def test_the_package_has_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_the_checker_finds_a_circle_held_by_a_lazy_import() -> None:
    """The checker itself: a lazy import inside a function closes a circle, a TYPE_CHECKING one does not."""
    eager = _imported_names(ast.parse("import kubetrain.b\n"))
    lazy = _imported_names(ast.parse("def f():\n    from kubetrain.a import x\n"))
    typing_only = _imported_names(ast.parse("if TYPE_CHECKING:\n    from kubetrain.a import x\n"))
    assert "kubetrain.a" in lazy and "kubetrain.a" not in typing_only and "kubetrain.b" in eager
    graph = {"kubetrain.a": frozenset({"kubetrain.b"}), "kubetrain.b": frozenset({"kubetrain.a"}),
             "kubetrain.c": frozenset({"kubetrain.a"})}
    assert circles(graph) == [["kubetrain.a", "kubetrain.b"]]


def test_the_rule_registry_is_at_the_bottom() -> None:
    """Every module that declares a rule imports the registry; it imports nothing of kubetrain (beyond the
    package it sits in, which only points jsii at the wheel's Node)."""
    assert reachable("kubetrain.rules.registry") <= {"kubetrain", "kubetrain.node_runtime", "kubetrain.rules"}
    assert import_graph()["kubetrain.rules"] == frozenset()


def test_kinds_and_offline_commands_start_no_node() -> None:
    """The descriptors are read by `kubetrain validate`, `diff` and `plan`, which never start cdk8s's Node.js: no
    module they import imports cdk8s (or the construct modules that do)."""
    cdk8s_modules = {name for name, path in modules().items()
                     if {"cdk8s", "constructs"} & {n.split(".")[0] for n in _imported_names(ast.parse(path.read_text()))}}
    for command in ("kubetrain.kinds.kind_registry", "kubetrain.validation.validate", "kubetrain.gitops.diff",
                    "kubetrain.admission.plan_command", "kubetrain.gitops.sync_check"):
        assert not reachable(command) & cdk8s_modules, command
