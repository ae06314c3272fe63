"""A captured function's source: its exact text, and what that text reads from outside itself.

The text is the function's lines as its file holds them, less the indentation of its `def` (a nested function's,
as the Kubeflow SDK dedents it), taken from code lines only: a multi-line string keeps its own lines as written,
where `textwrap.dedent` would shift them too. It is then compiled again and compared with the function's own code
object, so the pods never run text that differs from what ran at synth (a file edited since its import, say).

What the text reads from outside itself is resolved as Python resolves names (the `symtable` module: the
compiler's own scopes, with comprehensions, class bodies, `global`, `nonlocal` and `del`), walked beside the `ast`
for the line of each use: every name that resolves to the module scope and the text does not bind there. A use
inside `if TYPE_CHECKING:` never runs and is left out; one inside a `try` whose handler catches NameError is
marked, as a use that cannot fail. Where the text can bind names Python cannot see (`exec`, `eval`, `globals()`,
`vars()`, `__builtins__`), nothing is judged.
"""

from __future__ import annotations

import __future__
import ast
import builtins
import inspect
import io
import symtable
import tokenize
import types
from dataclasses import dataclass, field

# Names a function's text may read that no scope of its own binds: the builtins, and the module attributes a
# script run by torchrun has.
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__",
                                            "__loader__", "__package__"}
# A name any of these reads may be bound where no scope shows it.
OPAQUE_NAMES = frozenset({"exec", "eval", "globals", "vars", "__builtins__"})
# What catches the NameError of an unbound name.
NAME_ERROR_CATCHERS = frozenset({"NameError", "Exception", "BaseException"})
# torch.nn.DataParallel by every path torch exports it under (and its functional form).
DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                           "torch.nn.parallel.data_parallel.DataParallel", "torch.nn.parallel.data_parallel"})
_SCOPE_NAMES = {ast.ListComp: "listcomp", ast.SetComp: "setcomp", ast.DictComp: "dictcomp",
                ast.GeneratorExp: "genexpr", ast.Lambda: "lambda"}
# The one `from __future__` flag that changes what Python 3 code means: annotations kept as strings.
FUTURE_FLAGS = __future__.annotations.compiler_flag


class SourceMismatch(Exception):
    """The function's source cannot be captured as the code that ran: the reason is the message."""


def exact_source(func: types.FunctionType) -> tuple[str, int]:
    """The function's text without the indentation of its `def`, and the line of its file it starts on. Lines
    inside a multi-line string are kept as written."""
    lines, first = inspect.getsourcelines(func)
    text = "".join(lines)
    indent = len(lines[0]) - len(lines[0].lstrip())
    if not indent:
        return text, first
    inside_strings: set[int] = set()  # lines that continue a string token: its content, not code
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.start[0] != token.end[0] and token.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)):
            inside_strings.update(range(token.start[0] + 1, token.end[0] + 1))
    out = []
    for number, line in enumerate(lines, 1):
        if number in inside_strings:
            out.append(line)
        else:
            blank = len(line) - len(line.lstrip(" \t"))
            out.append(line[min(indent, blank):])
    return "".join(out), first


def future_flags(func: types.FunctionType) -> int:
    """The `from __future__` flags the function's module was compiled with."""
    return func.__code__.co_flags & FUTURE_FLAGS


def check_same_code(func: types.FunctionType, script: str) -> None:
    """Raise SourceMismatch unless `script` (the function's text with what is written above it: the compiler
    reads a module's imports), compiled as the pods compile it, gives the function's own code."""
    module = compile(script, func.__code__.co_filename, "exec", dont_inherit=True)
    compiled = next((c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == func.__name__),
                    None)
    prefix = func.__qualname__[:-len(func.__name__)]
    if compiled is None or not _same_code(compiled, func.__code__, prefix):
        raise SourceMismatch(f"its source file ({func.__code__.co_filename}) no longer holds the code that was "
                             "imported (edited since?)")


def _same_code(a: types.CodeType, b: types.CodeType, prefix: str) -> bool:
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars, a.co_argcount, a.co_kwonlyargcount,
            a.co_posonlyargcount) != (b.co_code, b.co_names, b.co_varnames, b.co_freevars, b.co_cellvars,
                                      b.co_argcount, b.co_kwonlyargcount, b.co_posonlyargcount):
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y, prefix):
                return False
        elif type(x) is not type(y) or (x != y and repr(x) != repr(y) and not _moved(x, y, a, b, prefix)):
            return False
    return True


def _moved(x: object, y: object, a: types.CodeType, b: types.CodeType, prefix: str) -> bool:
    """Constants a class body holds that differ only because the text stands elsewhere: its __qualname__ (with a
    nested function's enclosing names) and, since Python 3.13, its __firstlineno__."""
    if isinstance(x, str):
        return prefix + x == y
    return "__firstlineno__" in a.co_names and (x, y) == (a.co_firstlineno, b.co_firstlineno)


@dataclass
class Reading:
    """What the text reads from the module scope (`outside`: each name with the lines of its uses, in the text's
    own numbering; `guarded`: those of them read only inside a try that catches NameError), whether unseen
    bindings make the outside names unjudgeable (`opaque`: the name that makes them so), and the lines that use
    torch.nn.DataParallel."""

    outside: dict[str, list[int]] = field(default_factory=dict)
    guarded: set[str] = field(default_factory=set)
    opaque: str | None = None
    data_parallel: list[int] = field(default_factory=list)


def read(text: str, flags: int, globals_: dict[str, object]) -> Reading:
    """Resolve every name `text` (a module holding one def) reads. `flags`: its `from __future__` flags (with
    annotations postponed, an annotation reads nothing). `globals_`: the function's module, for the aliases
    under which it imported torch."""
    tree = ast.parse(text)
    table = symtable.symtable(text, "<function>", "exec")
    walker = _Walker(evaluated_annotations=not flags & FUTURE_FLAGS)
    walker.scope(tree, table)
    reading = Reading()
    bound = walker.bound_globally | {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    for name, lines in walker.uses.items():
        if name in OPAQUE_NAMES:
            reading.opaque = name
        if name not in bound and name not in BUILTIN_NAMES:
            reading.outside[name] = sorted({line for line, _ in lines})
            if all(guarded for _, guarded in lines):
                reading.guarded.add(name)
    reading.data_parallel = _data_parallel_lines(tree, globals_)
    return reading


class _Walker:
    """Walks the ast beside the symbol tables: each Name read, in the scope it is read in, resolved by the
    table of that scope."""

    def __init__(self, evaluated_annotations: bool):
        self.evaluated_annotations = evaluated_annotations
        self.uses: dict[str, list[tuple[int, bool]]] = {}  # name -> (line, inside a try catching NameError)
        self.bound_globally: set[str] = set()  # names a `global` declaration lets some scope bind
        self.guarded = 0

    def scope(self, node: ast.AST, table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if symbol.is_declared_global() and (symbol.is_assigned() or symbol.is_imported()):
                self.bound_globally.add(symbol.get_name())
        children = list(table.get_children())
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        for statement in body:
            self.visit(statement, table, children, in_class=isinstance(node, ast.ClassDef))

    def child(self, children: list[symtable.SymbolTable], name: str, line: int) -> symtable.SymbolTable | None:
        for i, table in enumerate(children):
            if table.get_name() == name and table.get_lineno() == line:
                return children.pop(i)
        return None

    def use(self, name: str, line: int, table: symtable.SymbolTable) -> None:
        try:
            symbol = table.lookup(name)
        except KeyError:  # a scope this Python does not show: cannot tell, so nothing is claimed
            return
        if symbol.is_global():
            self.uses.setdefault(name, []).append((line, self.guarded > 0))

    def visit(self, node: ast.AST, table: symtable.SymbolTable, children: list[symtable.SymbolTable],
              in_class: bool = False) -> None:
        def here(item: ast.AST | None) -> None:
            if item is not None:
                self.visit(item, table, children, in_class)

        def annotation(item: ast.AST | None) -> None:
            if self.evaluated_annotations:
                here(item)

        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                self.use(node.id, node.lineno, table)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            for item in [*getattr(node, "decorator_list", []), *arguments.defaults, *arguments.kw_defaults]:
                here(item)
            if not isinstance(node, ast.Lambda):
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                            arguments.kwarg]:
                    annotation(arg.annotation if arg is not None else None)
                annotation(node.returns)
            inner = self.child(children, _SCOPE_NAMES.get(type(node), getattr(node, "name", "")), node.lineno)
            if inner is not None:  # else a scope this Python lays out otherwise: its uses are not judged
                self.scope(node, inner)
        elif isinstance(node, ast.ClassDef):
            for item in [*node.decorator_list, *node.bases, *node.keywords]:
                here(item)
            inner = self.child(children, node.name, node.lineno)
            if inner is not None:
                self.scope(node, inner)
        elif type(node) in _SCOPE_NAMES:  # a comprehension: its first iterable is read where it stands
            generators = node.generators
            here(generators[0].iter)
            inner = self.child(children, _SCOPE_NAMES[type(node)], node.lineno)
            inner_children = list(inner.get_children()) if inner else children
            rest = [*(g.target for g in generators), *(g.iter for g in generators[1:]),
                    *(c for g in generators for c in g.ifs),
                    *([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt])]
            for item in rest:
                self.visit(item, inner or table, inner_children)
        elif isinstance(node, ast.AnnAssign):
            here(node.target)
            here(node.value)
            if in_class:  # a local variable's annotation is never evaluated; a class attribute's is
                annotation(node.annotation)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for item in node.orelse:
                here(item)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            catches = any(_catches_name_error(h) for h in node.handlers)
            self.guarded += catches
            for item in node.body:
                here(item)
            self.guarded -= catches
            for item in [*node.handlers, *node.orelse, *node.finalbody]:
                here(item)
        else:
            for item in ast.iter_child_nodes(node):
                here(item)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _catches_name_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((isinstance(k, ast.Name) and k.id in NAME_ERROR_CATCHERS) or
               (isinstance(k, ast.Attribute) and k.attr in NAME_ERROR_CATCHERS) for k in kinds)


def _data_parallel_lines(tree: ast.Module, globals_: dict[str, object]) -> list[int]:
    """Lines that name torch.nn.DataParallel, by any alias: `nn.DataParallel`, `torch.nn.parallel.DataParallel`,
    `from torch.nn import DataParallel as DP` then `DP`, a module-level `import torch.nn as tnn`."""
    aliases: dict[str, str] = {}
    for name, value in globals_.items():
        if isinstance(value, types.ModuleType):
            aliases[name] = value.__name__
        elif isinstance(value, type) or callable(value):
            aliases[name] = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    lines = set()
    for node in ast.walk(tree):
        dotted = _dotted(node, aliases) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if dotted in DATA_PARALLEL:
            lines.add(node.lineno)
    return sorted(lines)


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(attributes)])
