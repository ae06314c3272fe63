"""A Python function as a job's workload: the GitOps form of the Kubeflow SDK's `CustomTrainer(func=...)`.

    def train(epochs: int, lr: float):
        import torch.distributed as dist
        ...

    TrainingJob(cluster, "mnist", ..., workload=Function(train, kwargs={"epochs": 3, "lr": 0.1},
                                                          packages=["torchvision"]))

kubetrain captures the function at synth, as the SDK does when it submits a job (kubeflow/sdk,
kubeflow/trainer/backends/kubernetes/utils.py `get_command_using_train_func`: inspect.getsource, dedented, then the
call): the job's ConfigMap holds `function.py` (its source, then the call), `kwargs.json` (the arguments, as JSON)
and `requirements.txt` (the packages). The pods mount it and run `function.py` under torchrun, so the pull request
shows the code that will run, and `kubetrain diff` shows a change to it line by line.

Only a function whose source says everything it needs can be captured faithfully; anything else is refused with
the reason (KT157): a lambda, a nested function or a closure (its free variables are the enclosing call's),
a function of `__main__` or of interactive input (no module the source is read from again), a decorated or
async one, one whose source cannot be read, a module-level name it reads (a helper, a constant, a module the
image may not have: import it inside the function, or pass the value in kwargs; modules of the standard library,
torch and the listed packages are imported for it), a default value that names one, and kwargs that do not bind
to its parameters or do not survive JSON unchanged (a tuple, a non-string key, NaN, an object).

A function with a parameter named `run` gets the runtime from the launcher: `run` is kubetrain_runtime.Run, which the
job's environment configures (its checkpoint_dir), so `run = run(model, optimizer, max_steps=...)` gives the loop
verified checkpoints, exact resume, the stop with a save, rollback and metrics (the image needs kubetrain_runtime).

Packages are pip requirement strings (PEP 508, checked with `packaging`); like the SDK, the pod installs them
before torchrun starts (`pip install --prefix` into a node-local emptyDir: what the image already has is
left as it is, nothing is written to the image's site-packages). An install that fails exits 1 with pip's log.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import dis
import inspect
import json
import sys
import textwrap
import types
from functools import cached_property
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import Field, InstanceOf, field_validator, model_validator

from kubetrain.names import AbsolutePath
from kubetrain.rules.registry import register
from kubetrain.strict import StrictProps
from kubetrain_runtime.problems import Text, rule_violation

RUN_PARAMETER = "run"  # a function with a parameter of this name gets kubetrain_runtime.Run from the launcher
FUNCTION_FILE = "function.py"
KWARGS_FILE = "kwargs.json"
REQUIREMENTS_FILE = "requirements.txt"
PACKAGES_VOLUME, PACKAGES_DIR = "kubetrain-packages", "/var/kubetrain/packages"
ALWAYS_IMPORTABLE = {"torch"}  # torchrun runs the function: the image has torch

NOT_CAPTURED = register(
    "KT157", "error", "a function workload that cannot be captured faithfully",
    rationale="The pods run the function's source text, captured at synth, with its kwargs read back from JSON: "
              "whatever the text does not contain (a closure's variables, a module-level helper or constant, a "
              "decorator, an object in kwargs) would be missing or different in the pod, and fail there, after "
              "the merge.",
    fix="define the function at the top level of a module, import what it needs inside it, pass its inputs as "
        "JSON values in kwargs, and list the pip packages it needs in packages",
    source="https://github.com/kubeflow/sdk/blob/main/kubeflow/trainer/backends/kubernetes/utils.py")


def _refuse(message: str, fix: str = NOT_CAPTURED.fix, field: str = "func") -> Exception:
    return rule_violation(NOT_CAPTURED.code, message, fix, field=field)


def _names_read(code: types.CodeType) -> set[str]:
    """Module-level names the code (and the functions and classes defined in it) reads: LOAD_GLOBAL, and the
    LOAD_NAME of a class body that the body did not bind itself."""
    found: set[str] = set()
    stored = {i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_NAME", "IMPORT_NAME")}
    for instruction in dis.get_instructions(code):
        if instruction.opname == "LOAD_GLOBAL" or (instruction.opname == "LOAD_NAME" and
                                                   instruction.argval not in stored):
            found.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names_read(const)
    return {name for name in found if not (name.startswith("__") and name.endswith("__"))}


def _importable(module: str, packages: list[str]) -> bool:
    top = module.partition(".")[0]
    names = {canonicalize_name(Requirement(p).name) for p in packages}
    return top in sys.stdlib_module_names or top in ALWAYS_IMPORTABLE or canonicalize_name(top) in names


class Function(StrictProps):
    """A Python function the pods run under torchrun, one call per rank (torchrun sets RANK, WORLD_SIZE, ...).

    `Function(train, kwargs={...}, packages=[...])`: the function positionally, like the SDK's `func`.
    """

    kind: Literal["function"] = "function"
    func: InstanceOf[types.FunctionType] = Field(..., description="A function defined at the top level of a module.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Its arguments, JSON values: written to the "
                                                                     "ConfigMap and passed by name.")
    packages: list[Text] = Field(default_factory=list, description="pip requirements installed in the pod before "
                                                                   "torchrun starts, e.g. ['transformers>=4.57'].")
    checkpoint_dir: AbsolutePath | None = Field(None, description="Where the function saves checkpoints; checked to "
                                                                  "be on a persistent volume when given.")

    def __init__(self, func: Any = None, /, **data: Any) -> None:
        super().__init__(**({"func": func} if func is not None else {}), **data)

    @field_validator("packages")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        seen: dict[str, int] = {}
        for i, text in enumerate(value):
            try:
                name = canonicalize_name(Requirement(text).name)
            except InvalidRequirement as error:
                reason = str(error).splitlines()[0]
                raise rule_violation(NOT_CAPTURED.code, f"packages.{i} {text!r} is not a pip requirement: {reason}",
                                     "write a PEP 508 requirement, e.g. 'transformers>=4.57' or 'numpy==2.2.*' (pip "
                                     "options such as --index-url are not requirements)") from None
            if name in seen:
                raise rule_violation(NOT_CAPTURED.code, f"packages.{i} names {name} again (packages.{seen[name]})",
                                     "list each package once")
            seen[name] = i
        return value

    @model_validator(mode="after")
    def _capturable(self) -> Function:
        func = self.func
        where = f"{func.__module__}.{func.__qualname__}"
        if func.__name__ == "<lambda>":
            raise _refuse("a lambda has no name to call and no source of its own",
                          "write it as a def at the top level of a module")
        if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
            raise _refuse(f"{where} is async: torchrun would start a coroutine and never run it",
                          "write a plain def (run your own event loop inside it if you need one)")
        if func.__module__ == "__main__":
            raise _refuse(f"{func.__name__} is defined in __main__ (a script run directly, or interactive input): "
                          "its source cannot be read back reliably", "define it in a module the fleet imports")
        if "<locals>" in func.__qualname__:
            raise _refuse(f"{where} is nested in another function: it may use that call's variables, which the pod "
                          "does not have", "define it at the top level of its module")
        if func.__code__.co_freevars:
            raise _refuse(f"{where} is a closure over {', '.join(func.__code__.co_freevars)}",
                          "pass those values in kwargs")
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError) as error:
            raise _refuse(f"the source of {where} cannot be read ({error})",
                          "define it in a .py file the fleet imports") from None
        tree = ast.parse(source)
        node = tree.body[0] if tree.body else None
        if not isinstance(node, ast.FunctionDef) or node.name != func.__name__:
            raise _refuse(f"the source found for {where} is not its def", "define it with def at the top level of "
                          "a module")
        if node.decorator_list:
            raise _refuse(f"{where} is decorated: the pod would run the decorator's name without its definition, "
                          "and the capture is of the undecorated function", "remove the decorator")
        builtin = set(dir(builtins))
        defaults = [n.id for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None
                    for n in ast.walk(d) if isinstance(n, ast.Name)]
        for name in defaults:
            if name not in builtin:
                raise _refuse(f"a default value of {where} reads {name!r}, a name of its module the pod does not "
                              "have", "write the default as a literal, or pass the value in kwargs")
        for name in sorted(_names_read(func.__code__) - builtin):
            if name not in func.__globals__:
                continue  # a name that does not exist fails the same way wherever it runs
            value = func.__globals__[name]
            if isinstance(value, types.ModuleType):
                if not _importable(value.__name__, self.packages):
                    raise _refuse(f"{where} uses module {value.__name__} (imported at module level as {name!r}), "
                                  "which the image may not have", f"import {value.__name__} inside the function and "
                                  "make sure the image has it, or add it to packages")
            else:
                raise _refuse(f"{where} reads {name!r}, a module-level {type(value).__name__} that the captured "
                              "source does not contain", "define it inside the function, import it there, or pass "
                              "its value in kwargs")
        self._check_kwargs()
        return self

    @property
    def takes_run(self) -> bool:
        """Whether the function has a parameter named `run`: the launcher passes it kubetrain_runtime.Run."""
        parameter = inspect.signature(self.func).parameters.get(RUN_PARAMETER)
        return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)

    def _check_kwargs(self) -> None:
        signature = inspect.signature(self.func)
        names = [n for n, p in signature.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        if self.takes_run and RUN_PARAMETER in self.kwargs:
            raise _refuse(f"kwargs.{RUN_PARAMETER}: the launcher passes {self.func.__name__}'s parameter "
                          f"{RUN_PARAMETER!r} (kubetrain_runtime.Run)", f"remove {RUN_PARAMETER} from kwargs",
                          field="kwargs")
        for key in self.kwargs:
            if key not in names and not takes_any:
                guess = difflib.get_close_matches(key, names, n=1)
                raise _refuse(f"kwargs.{key}: {self.func.__name__}{signature} has no parameter {key!r}",
                              (f"did you mean {guess[0]!r}? " if guess else "") + f"use its parameters: "
                              f"{', '.join(names) or 'none'}", field="kwargs")
        try:
            signature.bind(**self.kwargs, **({RUN_PARAMETER: None} if self.takes_run else {}))
        except TypeError as error:
            raise _refuse(f"kwargs do not fit {self.func.__name__}{signature}: {error}",
                          "give every parameter without a default, and only its parameters", field="kwargs") from None
        for key, value in self.kwargs.items():
            try:
                back = json.loads(json.dumps(value, allow_nan=False))
            except (TypeError, ValueError) as error:
                raise _refuse(f"kwargs.{key} is not JSON ({error})", "pass numbers, strings, booleans, None, lists "
                              "and mappings with string keys", field="kwargs") from None
            if not _same(back, value):
                raise _refuse(f"kwargs.{key} is not the same after JSON ({type(value).__name__} {value!r} comes back "
                              f"as {back!r})", "pass lists instead of tuples and string keys in mappings",
                              field="kwargs")

    # -- what the pods get ---------------------------------------------------------------------------------------

    @cached_property
    def source(self) -> str:
        return textwrap.dedent(inspect.getsource(self.func))

    def script(self) -> str:
        """function.py: the imports it relies on from its module, its source, and the call with kwargs.json."""
        imports = []
        for name in sorted(_names_read(self.func.__code__) - set(dir(builtins))):
            value = self.func.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                module = value.__name__
                imports.append(f"import {module}" if module == name else
                               f"import {module} as {name}" if "." not in module or module.rpartition(".")[2] != name
                               else f"from {module.rpartition('.')[0]} import {name}")
        origin = f"{self.func.__module__}.{self.func.__qualname__}"
        header = [f"# Captured by kubetrain at synth from {origin}: the pods run this file under torchrun.",
                  "from __future__ import annotations", "", *imports, *(["", ""] if imports else [""])]
        call = ["", "", 'if __name__ == "__main__":', "    import json", "    import pathlib", "",
                f"    kwargs = json.loads((pathlib.Path(__file__).parent / {KWARGS_FILE!r}).read_text())",
                *([f"    from kubetrain_runtime import Run as {RUN_PARAMETER}", "",
                   f"    {self.func.__name__}(**kwargs, {RUN_PARAMETER}={RUN_PARAMETER})"] if self.takes_run else
                  [f"    {self.func.__name__}(**kwargs)"]), ""]
        return "\n".join(header) + "\n" + self.source.rstrip("\n") + "\n" + "\n".join(call)

    def files(self) -> dict[str, str]:
        """The ConfigMap's data."""
        files = {FUNCTION_FILE: self.script(), KWARGS_FILE: json.dumps(self.kwargs, indent=2, sort_keys=True) + "\n"}
        if self.packages:
            files[REQUIREMENTS_FILE] = "".join(f"{p}\n" for p in self.packages)
        return files

    def definition(self) -> dict[str, Any]:
        """What the run's name hashes (create-once runs): what the pods get, not the Python object."""
        return {"kind": self.kind, "files": self.files(), "checkpoint_dir": self.checkpoint_dir}


def _same(back: Any, value: Any) -> bool:
    """The JSON round trip gave back the same value, of the same types all the way down (a tuple comes back as a
    list, an int key as a string, an IntEnum as an int)."""
    if type(back) is not type(value):
        return False
    if isinstance(value, dict):
        return back.keys() == value.keys() and all(_same(back[k], value[k]) for k in value)
    if isinstance(value, list):
        return len(back) == len(value) and all(_same(x, y) for x, y in zip(back, value))
    return back == value


PACKAGES_ENV = {"KUBETRAIN_PACKAGES": PACKAGES_DIR}  # the launcher reads the folder from here (run-local maps it)
REQUIREMENTS_ENV = "KUBETRAIN_REQUIREMENTS"

# Shell lines that install the packages into the node-local emptyDir and put them on the path (pip leaves a
# requirement the image already meets as it is). The paths come from the environment, where run-local maps them.
INSTALL_SCRIPT = f'''p="$KUBETRAIN_PACKAGES"
if ! python -m pip install --quiet --disable-pip-version-check --no-warn-script-location --prefix "$p" \\
    -r "${REQUIREMENTS_ENV}" > "$p/pip.log" 2>&1; then
  cat "$p/pip.log" >&2; echo "kubetrain: installing the function's packages failed" >&2; exit 1
fi
for d in $(find "$p" -type d \\( -name site-packages -o -name dist-packages \\)); do
  PYTHONPATH="$d${{PYTHONPATH:+:$PYTHONPATH}}"
done
export PYTHONPATH PATH="$p/bin:$PATH"
'''
