"""The shape of the project's imports, read statically from its source: the layers are held, and there is no
circle.

Every import counts: at module level, in classes, inside functions (a lazy import is still an edge, and a circle
held together by one is still a circle) and under `if TYPE_CHECKING:` (a type-only import is still an arrow a
reader follows, and the layering it breaks is as real). Importing `a.b.c` also runs the packages `a` and `a.b`,
so an import is an edge to each package on the way.

The layers, bottom first: a module may import only from its own layer and the layers below it (docs/reference/layout.md
says what each holds). kubetrain_runtime is below training, and training below the compiler (which reads
the run config's model); the compiler's own packages are ordered as LAYERS lists them.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "constructs" / "kubetrain"
SOURCES = {"kubetrain": PACKAGE, "training": ROOT / "training", "kubetrain_runtime": ROOT / "kubetrain_runtime"}

# Bottom first. A name is a top-level package or module: "kubetrain.model" covers kubetrain/model/ and all in it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kubetrain_runtime",),
    ("training",),
    ("kubetrain", "kubetrain.node_runtime"),  # the package only points jsii at the wheel's Node; names load lazily
    ("kubetrain.rules",),  # the rule registry and the sources rules cite
    ("kubetrain.model",),  # plain data: names, quantities, vocabulary, manifests, what operators create
    ("kubetrain.state",),  # what the fleet's constructs share while it is defined
    ("kubetrain.apiserver",),  # the API server's own checks, named by the kinds
    ("kubetrain.kinds",),  # one descriptor per API kind, and the launch targets
    ("kubetrain.cost",),
    ("kubetrain.admission",),
    ("kubetrain.schedule",),  # when jobs start: Kueue's scheduler over time, on admission's cohort tree
    ("kubetrain.validation",),  # schemas, CEL, and each kind's API-server checks on every object
    ("kubetrain.output",),  # objects as written: rendering, YAML text, the writer
    ("kubetrain.cluster",),
    ("kubetrain.platform",),
    ("kubetrain.jobs",),
    ("kubetrain.gitops",),
    ("kubetrain.pipeline",),  # synth, step by step
    ("kubetrain.app", "kubetrain.fleet"),
    ("kubetrain.local",),
    ("kubetrain.cli", "kubetrain.__main__"),
)


def _module_name(path: Path, package: str, root: Path) -> str:
    parts = (package, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(path, package, root): path
            for package, root in SOURCES.items() for path in sorted(root.rglob("*.py"))}


def _imported_names(tree: ast.AST, module: str = "", is_package: bool = False) -> set[str]:
    """Dotted names of everything `tree` imports, lazily or for type checking included (relative imports
    resolved against `module`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join([*parts[:len(parts) - node.level + 1], *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the project's modules importing it can run (their packages included)."""
    known = modules()
    graph = {}
    for name, path in known.items():
        edges = set()
        for imported in _imported_names(ast.parse(path.read_text()), name, path.name == "__init__.py"):
            parts = imported.split(".")
            edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in known)
        edges.discard(name)
        graph[name] = frozenset(edges)
    return graph


def layer_of(module: str) -> int:
    """The index in LAYERS of the most specific name that covers `module`."""
    best, found = -1, None
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(f"{name}.")) and len(name) > best:
                best, found = len(name), index
    assert found is not None, f"{module} is in no layer: add it to LAYERS (and docs/reference/layout.md)"
    return found


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


def test_the_project_has_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_the_checker_finds_a_circle_held_by_a_lazy_or_type_only_import() -> None:
    """The checker itself: a lazy import inside a function and a TYPE_CHECKING one are edges like any other."""
    eager = _imported_names(ast.parse("import kubetrain.b\n"))
    lazy = _imported_names(ast.parse("def f():\n    from kubetrain.a import x\n"))
    typing_only = _imported_names(ast.parse("if TYPE_CHECKING:\n    from kubetrain.a import x\n"))
    relative = _imported_names(ast.parse("from .a import x\n"), "kubetrain.b")
    assert "kubetrain.a" in lazy and "kubetrain.a" in typing_only and "kubetrain.b" in eager
    assert "kubetrain.a" in relative
    graph = {"kubetrain.a": frozenset({"kubetrain.b"}), "kubetrain.b": frozenset({"kubetrain.a"}),
             "kubetrain.c": frozenset({"kubetrain.a"})}
    assert circles(graph) == [["kubetrain.a", "kubetrain.b"]]


def test_every_import_points_down_the_layers() -> None:
    """No module imports one of a higher layer; every module is in a layer."""
    upward = [f"{module} (layer {layer_of(module)}) imports {edge} (layer {layer_of(edge)})"
              for module, edges in import_graph().items() for edge in sorted(edges)
              if layer_of(edge) > layer_of(module)]
    assert upward == []


def test_the_layer_checker_sees_an_upward_arrow() -> None:
    assert layer_of("kubetrain.model.names") < layer_of("kubetrain.kinds.trainjob") < layer_of("kubetrain.pipeline")
    assert layer_of("kubetrain_runtime.run") < layer_of("training.trainer") < layer_of("kubetrain.model.manifests")


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
