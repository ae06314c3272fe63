"""A Python function as a job's workload: the GitOps form of the Kubeflow SDK's `CustomTrainer(func=...)`.

    def train(epochs: int, lr: float):
        import torch.distributed as dist
        ...

    TrainingJob(cluster, "mnist", ..., workload=Function(train, kwargs={"epochs": 3, "lr": 0.1},
                                                          packages=["torchvision"]))

kubetrain captures the function at synth, as the SDK does when it submits a job (kubeflow/sdk,
kubeflow/trainer/backends/kubernetes/utils.py `get_command_using_train_func`: inspect.getsource, dedented, then the
call): the job's ConfigMap holds `function.py` (its source as written, then the call), `kwargs.json` (the
arguments, as JSON) and `requirements.txt` (the package indexes and packages). The pods mount it and run
`function.py` under torchrun, so the pull request shows the code that will run, and `kubetrain diff` shows a change
to it line by line. The source is the function's own text (jobs/function_source.py): compiled again at synth, it
must give the code that ran there, and nothing is added inside it. Above it, `function.py` has only what its
module gave it: `from __future__ import annotations` when the module has it, and the imports of the modules it
reads from the module.

Only a function whose source says everything it needs can be captured faithfully; anything else is refused with
the reason (KT157): a lambda, a closure (its free variables are the enclosing call's; a nested function that
closes over nothing is captured, dedented, as the SDK captures it), a method, a function of `__main__` or of
interactive input (a pull request must show a module's source), a decorated or async one, one whose source cannot
be read or no longer matches its code, a module-level name it reads (a helper, a constant, a module the image may
not have: import it inside the function, or pass the value in kwargs; modules of the standard library, torch and
the listed packages are imported for it), and kwargs that do not bind to its parameters or do not survive JSON
unchanged (a tuple, a non-string key, NaN, an object). A name nothing defines is KT158, torch.nn.DataParallel in a
function of several ranks KT159 (jobs/checks/function_checks.py).

A function with a parameter named `run` gets the runtime from the launcher: `run` is kubetrain_runtime.Run, which the
job's environment configures (its checkpoint_dir), so `run = run(model, optimizer, max_steps=...)` gives the loop
verified checkpoints, exact resume, the stop with a save, rollback and metrics (the image needs kubetrain_runtime).

Packages are pip requirement strings (PEP 508, checked with `packaging`); like the SDK, the pod installs them
before torchrun starts, from `pip_index_urls` when given (the first the index, the others extra indexes, as the
SDK's field; one held in a Secret is read from the pod's environment: credentials never go in git, KT160), with
`python -m ensurepip` where the image has no pip, and `PIP_BREAK_SYSTEM_PACKAGES=1`. They go into a node-local
emptyDir (`pip install --prefix`: what the image already has is left as it is, nothing is written to the image),
which comes first on the ranks' path, its `.pth` files processed (`site.addsitedir`) as site-packages' are. An
install that fails exits 1 with pip's log.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import symtable
import sys
import tokenize
import types
import urllib.parse
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal, Union

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import AfterValidator, Discriminator, Field, InstanceOf, Tag, field_validator, model_validator

from kubetrain.jobs.function_source import (
    BUILTIN_NAMES,
    FUTURE_FLAGS,
    Reading,
    SourceMismatch,
    check_same_code,
    exact_source,
    future_flags,
    read,
)
from kubetrain.model.names import AbsolutePath, Dns1123Subdomain, config_map_key_problem
from kubetrain.model.strict import StrictProps
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import Problem, Text, rule_violation
from kubetrain_runtime.spelling import did_you_mean

RUN_PARAMETER = "run"  # a function with a parameter of this name gets kubetrain_runtime.Run from the launcher
FUNCTION_FILE = "function.py"
KWARGS_FILE = "kwargs.json"
REQUIREMENTS_FILE = "requirements.txt"
PACKAGES_VOLUME, PACKAGES_DIR = "kubetrain-packages", "/var/kubetrain/packages"
ALWAYS_IMPORTABLE = {"torch"}  # torchrun runs the function: the image has torch
SITE_DIRS_ENV = "KUBETRAIN_SITE_DIRS"  # the install's site-packages folders, for function.py to process
SECRET_INDEX_ENV = "KUBETRAIN_PIP_INDEX_{}"  # pip_index_urls[i] when a Secret holds it
# The query parameters that carry credentials in an index URL (a token, a signed URL's signature).
_CREDENTIAL_PARAMETER = re.compile(r"token|key|secret|pass|auth|sig|credential|session", re.IGNORECASE)

NOT_CAPTURED = register(
    "KT157", "error", "a function workload that cannot be captured faithfully",
    rationale="The pods run the function's source text, captured at synth, with its kwargs read back from JSON: "
              "whatever the text does not contain (a closure's variables, a module-level helper or constant, a "
              "decorator, an object in kwargs) would be missing or different in the pod, and fail there, after "
              "the merge.",
    fix="define the function in a module (at its top level, or nested in a function without using that "
        "function's variables), import what it needs inside it, pass its inputs as JSON values in kwargs, and list "
        "the pip packages it needs in packages",
    source="https://github.com/kubeflow/sdk/blob/main/kubeflow/trainer/backends/kubernetes/utils.py")

INDEX_URL = register(
    "KT160", "error", "a package index that is not a URL, or one with credentials in git",
    rationale="pip reads an index URL's user, password or token as credentials: written in the job, they are in "
              "git, in the ConfigMap every reader of the namespace can see, and in pip's log. pip reads its index "
              "from PIP_INDEX_URL and from a requirements file's --index-url, either of which can come from a "
              "Secret when the pod starts.",
    fix="keep the credentials in a Secret and name it: pip_index_urls=[PipIndexSecret(secret='pypi', key='url')] "
        "(the Secret's key holds the whole URL), which the pod reads into its environment",
    source="https://pip.pypa.io/en/stable/topics/authentication/")


def _refuse(message: str, fix: str = NOT_CAPTURED.fix, field: str = "func") -> Exception:
    return rule_violation(NOT_CAPTURED.code, message, fix, field=field)


def index_url_problem(url: str) -> tuple[str, str] | None:
    """(message, fix) when `url` is not an index URL pip can use, or carries credentials."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as error:
        return f"{url!r} is not a URL ({error})", "write http(s)://host/path/simple"
    if parts.scheme not in ("https", "http", "file") or (parts.scheme != "file" and not parts.hostname):
        return (f"{url!r} is not an index URL", "write the index's https:// URL (e.g. https://pypi.org/simple), "
                "or a file:// one for a folder the image has")
    if any(c.isspace() for c in url) or "${" in url:
        return (f"{url!r} has spaces or a ${{...}} reference, which pip would read as more options or expand",
                "write the URL itself; for a URL built from a secret, use PipIndexSecret")
    if parts.username or parts.password:
        return f"{_redacted(url)} has credentials in it (user:password@)", INDEX_URL.fix
    secrets = [name for name, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
               if _CREDENTIAL_PARAMETER.search(name)]
    if secrets:
        return f"{_redacted(url)} has credentials in its query ({', '.join(secrets)})", INDEX_URL.fix
    return None


def _redacted(url: str) -> str:
    """The URL with its credentials masked: the message must not repeat them."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = ("***@" if parts.username or parts.password else "") + host + (f":{parts.port}" if parts.port else "")
    query = "&".join(f"{name}={'***' if _CREDENTIAL_PARAMETER.search(name) else value}"
                     for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _index_url(url: str) -> str:
    problem = index_url_problem(url)
    if problem:
        raise rule_violation(INDEX_URL.code, *problem)
    return url


def _secret_key(key: str) -> str:
    problem = config_map_key_problem(key)
    if problem:
        raise rule_violation(INDEX_URL.code, f"{key!r} is not a Secret key: {problem}",
                             "use the key's name as the Secret lists it: letters, digits, '-', '_' and '.'")
    return key


IndexUrl = Annotated[str, AfterValidator(_index_url)]


class PipIndexSecret(StrictProps):
    """A package index whose URL carries credentials, kept in a Secret of the job's namespace: the pod reads it
    into its environment when it starts, and pip reads it from there. The URL is never in git."""

    secret: Dns1123Subdomain = Field(..., description="The Secret's name, in the job's namespace.")
    key: Annotated[str, AfterValidator(_secret_key)] = Field(..., description="Its key that holds the whole URL, "
                                                                              "e.g. https://user:token@host/simple.")


PipIndex = Annotated[Union[Annotated[IndexUrl, Tag("IndexUrl")], Annotated[PipIndexSecret, Tag("PipIndexSecret")]],
                    Discriminator(lambda value: "IndexUrl" if isinstance(value, str) else "PipIndexSecret")]


@dataclass(frozen=True)
class Capture:
    """The function as the pods get it: its text (`exact_source`), the line of its file the text starts on, its
    module's `from __future__` flags, and what the text reads (`Reading`)."""

    text: str
    first_line: int
    flags: int
    reading: Reading


class Function(StrictProps):
    """A Python function the pods run under torchrun, one call per rank (torchrun sets RANK, WORLD_SIZE, ...).

    `Function(train, kwargs={...}, packages=[...])`: the function positionally, like the SDK's `func`.
    """

    kind: Literal["function"] = "function"
    func: InstanceOf[types.FunctionType] = Field(..., description="A function of a module: at its top level, or "
                                                                  "nested in a function, closing over nothing.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Its arguments, JSON values: written to the "
                                                                     "ConfigMap and passed by name.")
    packages: list[Text] = Field(default_factory=list, description="pip requirements installed in the pod before "
                                                                   "torchrun starts, e.g. ['transformers>=4.57'].")
    pip_index_urls: list[PipIndex] = Field(
        default_factory=list, description="Where pip finds the packages, as the SDK's field: the first is the index "
                                          "(--index-url), the others extra indexes (--extra-index-url). A "
                                          "PipIndexSecret for one that needs credentials. Default: the image's pip "
                                          "configuration (PyPI unless it says otherwise).")
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
                                     "write a PEP 508 requirement, e.g. 'transformers>=4.57' or 'numpy==2.2.*' (an "
                                     "index goes in pip_index_urls)") from None
            if name in seen:
                raise rule_violation(NOT_CAPTURED.code, f"packages.{i} names {name} again (packages.{seen[name]})",
                                     "list each package once")
            seen[name] = i
        return value

    @model_validator(mode="after")
    def _capturable(self) -> Function:
        func = self.func
        where = self.where
        if func.__name__ == "<lambda>":
            raise _refuse("a lambda has no name to call and no source of its own", "write it as a def in a module")
        if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
            raise _refuse(f"{where} is async: torchrun would start a coroutine and never run it",
                          "write a plain def (run your own event loop inside it if you need one)")
        if func.__module__ == "__main__":
            raise _refuse(f"{func.__name__} is defined in __main__ (a notebook, interactive input or a script run "
                          "directly): a pull request must show the source of a module, which the fleet imports "
                          "and the reviewers can read", "move it into a module of the repository and import it")
        scopes = func.__qualname__.split(".")
        if len(scopes) > 1 and scopes[-2] != "<locals>":
            raise _refuse(f"{where} is a method of {scopes[-2]}: the pod would call it without its class or instance",
                          "define it as a function of its module")
        if func.__code__.co_freevars:
            raise _refuse(f"{where} is a closure over {', '.join(func.__code__.co_freevars)}, variables of the call "
                          "that made it, which the pod does not have", "pass those values in kwargs")
        try:
            capture = self.capture
            node = ast.parse(capture.text).body[0]
        except (OSError, TypeError, SyntaxError, tokenize.TokenError, IndexError) as error:
            raise _refuse(f"the source of {where} cannot be read ({error})",
                          "define it in a .py file the fleet imports") from None
        if not isinstance(node, ast.FunctionDef) or node.name != func.__name__:
            raise _refuse(f"the source found for {where} is not its def", "define it with def in a module")
        if node.decorator_list:
            raise _refuse(f"{where} is decorated: the pod would run the decorator's name without its definition, "
                          "and the capture is of the undecorated function", "remove the decorator")
        defaults = {n.id for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None
                    for n in ast.walk(d) if isinstance(n, ast.Name)}
        for name in sorted(capture.reading.outside):
            if name not in func.__globals__:
                if name in (self._module_names or ()):  # bound below: a module-level name all the same
                    raise _refuse(f"{where} reads {name!r} ({self._at(name)}), a name of its module that the "
                                  "captured source does not contain", "define it inside the function, import it "
                                  "there, or pass its value in kwargs")
                continue  # a name nothing defines: KT158, reported with the job
            value = func.__globals__[name]
            if isinstance(value, types.ModuleType):
                if not _importable(value.__name__, self.packages):
                    raise _refuse(f"{where} uses module {value.__name__} (imported at module level as {name!r}), "
                                  "which the image may not have", f"import {value.__name__} inside the function and "
                                  "make sure the image has it, or add it to packages")
            elif name in defaults:
                raise _refuse(f"a default value of {where} reads {name!r}, a name of its module the pod does not "
                              "have", "write the default as a literal, or pass the value in kwargs")
            else:
                raise _refuse(f"{where} reads {name!r} ({self._at(name)}), a module-level {type(value).__name__} "
                              "that the captured source does not contain", "define it inside the function, import "
                              "it there, or pass its value in kwargs")
        try:
            check_same_code(func, self.script())
        except SourceMismatch as error:
            raise _refuse(f"the source of {where} cannot be captured as it ran: {error}",
                          "run synth again on the saved files") from None
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
                raise _refuse(f"kwargs.{key}: {self.func.__name__}{signature} has no parameter {key!r}",
                              did_you_mean(key, names) + f"use its parameters: "
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

    # -- the capture ---------------------------------------------------------------------------------------------

    @property
    def where(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"

    @property
    def file_name(self) -> str:
        """The name of the function's source file, as errors name it (with a line)."""
        return self.func.__code__.co_filename.rpartition("/")[2]

    @cached_property
    def capture(self) -> Capture:
        text, first = exact_source(self.func)
        flags = future_flags(self.func)
        return Capture(text, first, flags, read(text, flags, self.func.__globals__))

    def _at(self, name: str) -> str:
        """Where the source reads `name`: its file and line."""
        line = self.capture.first_line + self.capture.reading.outside[name][0] - 1
        return f"{self.file_name} line {line}"

    @cached_property
    def _module_names(self) -> set[str] | None:
        """The names the function's module binds at its top level, read from its source (a name bound below the
        line that built this Function is not in its globals yet); None when that cannot be told: no source, or a
        `from ... import *`."""
        try:
            source = inspect.getsource(sys.modules[self.func.__module__])
            tree = ast.parse(source)
        except (KeyError, OSError, TypeError, SyntaxError):
            return None
        if any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in ast.walk(tree)):
            return None
        return {s.get_name() for s in symtable.symtable(source, "<module>", "exec").get_symbols()
                if s.is_assigned() or s.is_imported()}

    def undefined_names(self) -> list[tuple[str, str]]:
        """(name, where it is read) for each name the function reads that nothing defines: not its own, not its
        parameters', not an import's, not a builtin, not its module's, and not read only where a NameError is
        caught. Empty when that cannot be told (the source calls exec, eval, globals() or vars(), or its module
        star-imports)."""
        reading = self.capture.reading
        if reading.opaque or self._module_names is None:
            return []
        return [(name, self._at(name)) for name in sorted(reading.outside) if name not in reading.guarded and
                name not in self.func.__globals__ and name not in self._module_names and name not in BUILTIN_NAMES]

    def data_parallel_lines(self) -> list[int]:
        """The lines of the function's file that use torch.nn.DataParallel."""
        return [self.capture.first_line + line - 1 for line in self.capture.reading.data_parallel]

    # -- what the pods get ---------------------------------------------------------------------------------------

    @property
    def source(self) -> str:
        """The function's source, as written (less its def's indentation, when nested)."""
        return self.capture.text

    def script(self) -> str:
        """function.py: what the function's module gave it, its source as written, and the call with kwargs.json."""
        origin = f"{self.where} ({self.file_name} line {self.capture.first_line})"
        lines = [f"# Captured by kubetrain at synth from {origin}.",
                 "# torchrun runs this file once per rank: the function's source as written, then its call with "
                 "kwargs.json."]
        if self.capture.flags & FUTURE_FLAGS:
            lines.append("from __future__ import annotations")
        if self.packages:
            lines += ["", "", "def _kubetrain_site_dirs():",
                      "    # The packages installed at pod start come first on the path (PYTHONPATH), and their .pth",
                      "    # files are processed as site-packages' are.",
                      "    import os",
                      "    import site",
                      "",
                      f"    for folder in filter(None, os.environ.get({SITE_DIRS_ENV!r}, '').split(os.pathsep)):",
                      "        site.addsitedir(folder)",
                      "", "", "_kubetrain_site_dirs()", "del _kubetrain_site_dirs"]
        imports = []
        for name in sorted(self.capture.reading.outside):
            value = self.func.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                module = value.__name__
                imports.append(f"import {module}" if module == name else
                               f"import {module} as {name}" if "." not in module or module.rpartition(".")[2] != name
                               else f"from {module.rpartition('.')[0]} import {name}")
        if imports:
            lines += ["", *imports]
        call = ['if __name__ == "__main__":', "    import json", "    import pathlib", "",
                f"    kwargs = json.loads((pathlib.Path(__file__).parent / {KWARGS_FILE!r}).read_text())",
                # The module binds no name `run` of its own: the function's code must compile as it was imported.
                *(["    import kubetrain_runtime", "",
                   f"    {self.func.__name__}(**kwargs, {RUN_PARAMETER}=kubetrain_runtime.Run)"] if self.takes_run else
                  [f"    {self.func.__name__}(**kwargs)"])]
        return "\n".join([*lines, "", ""]) + "\n" + self.source.rstrip("\n") + "\n\n\n" + "\n".join(call) + "\n"

    def requirements(self) -> str:
        """requirements.txt: the indexes, then the packages. pip expands ${VAR} in it: a Secret's URL comes from the
        pod's environment. A plain-http index's host is trusted, as its URL asks (pip ignores it otherwise)."""
        lines, trusted = [], []
        for i, index in enumerate(self.pip_index_urls):
            url = f"${{{SECRET_INDEX_ENV.format(i)}}}" if isinstance(index, PipIndexSecret) else index
            lines.append(f"{'--index-url' if i == 0 else '--extra-index-url'} {url}")
            if isinstance(index, str) and index.startswith("http://"):
                trusted.append(f"--trusted-host {urllib.parse.urlsplit(index).netloc}")
        return "".join(f"{line}\n" for line in [*lines, *dict.fromkeys(trusted), *self.packages])

    def secret_env(self) -> list[dict[str, Any]]:
        """The pod's variables for the indexes Secrets hold (none without packages: nothing is installed)."""
        if not self.packages:
            return []
        return [{"name": SECRET_INDEX_ENV.format(i), "valueFrom": {"secretKeyRef": {"name": index.secret,
                                                                                   "key": index.key}}}
                for i, index in enumerate(self.pip_index_urls) if isinstance(index, PipIndexSecret)]

    def files(self) -> dict[str, str]:
        """The ConfigMap's data."""
        files = {FUNCTION_FILE: self.script(), KWARGS_FILE: json.dumps(self.kwargs, indent=2, sort_keys=True) + "\n"}
        if self.packages:
            files[REQUIREMENTS_FILE] = self.requirements()
        return files


def _importable(module: str, packages: list[str]) -> bool:
    top = module.partition(".")[0]
    names = {canonicalize_name(Requirement(p).name) for p in packages}
    return top in sys.stdlib_module_names or top in ALWAYS_IMPORTABLE or canonicalize_name(top) in names


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


def index_env_problems(env: dict[str, str]) -> list[Problem]:
    """KT160 for pip's index variables in a job's own env: plain values, in git."""
    problems = []
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        for url in env.get(name, "").split():
            problem = index_url_problem(url)
            if problem and "credentials" in problem[0]:
                problems.append(Problem(INDEX_URL.code, f"env.{name}", *problem))
    return problems


PACKAGES_ENV = {"KUBETRAIN_PACKAGES": PACKAGES_DIR}  # the launcher reads the folder from here (run-local maps it)
REQUIREMENTS_ENV = "KUBETRAIN_REQUIREMENTS"

# Shell lines that install the packages into the node-local emptyDir and put them first on the path. Where the
# image has no pip (a slim image, a venv made without one), ensurepip's own copy goes into the emptyDir too, for
# this install only: nothing is written to the image, whoever the container runs as. pip leaves a requirement the
# image already meets as it is. The paths come from the environment, where run-local maps them. No `$(`: that is
# Kubernetes' variable syntax in a container's command.
INSTALL_SCRIPT = f'''p="$KUBETRAIN_PACKAGES"
pythonpath="${{PYTHONPATH:-}}"
if ! python -m pip --version > /dev/null 2>&1; then
  if ! python -m ensurepip --root "$p/.pip" > "$p/pip.log" 2>&1; then
    cat "$p/pip.log" >&2
    echo "kubetrain: the image has no pip, and ensurepip could not provide one: install pip in the image" >&2; exit 1
  fi
  find "$p/.pip" -type d \\( -name site-packages -o -name dist-packages \\) -prune > "$p/.pip/dirs"
  read -r pip_dir < "$p/.pip/dirs"
  export PYTHONPATH="$pip_dir${{pythonpath:+:$pythonpath}}"
fi
if ! PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet --disable-pip-version-check \\
    --no-warn-script-location --prefix "$p" -r "${REQUIREMENTS_ENV}" >> "$p/pip.log" 2>&1; then
  cat "$p/pip.log" >&2; echo "kubetrain: installing the function's packages failed" >&2; exit 1
fi
find "$p" -path "$p/.pip" -prune -o -type d \\( -name site-packages -o -name dist-packages \\) -prune -print \\
  > "$p/.site-dirs"
dirs=""
while read -r d; do dirs="${{dirs:+$dirs:}}$d"; done < "$p/.site-dirs"
export {SITE_DIRS_ENV}="$dirs" PYTHONPATH="$dirs${{dirs:+${{pythonpath:+:}}}}$pythonpath" PATH="$p/bin:$PATH"
'''
