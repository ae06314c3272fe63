"""Configuration problems: one shape for every bad-input report.

The compiler (when it builds YAML) and the runtime (when a pod starts) validate the same
models, so they share how a problem is described and printed: a rule code, the field path,
what is wrong and how to fix it. This module imports neither torch nor cdk8s.
"""

from __future__ import annotations

import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ValidationError, model_validator
from pydantic_core import PydanticCustomError, PydanticUndefined

from kubetrain_runtime.spelling import closest, did_you_mean

# Codes for problems found by the schema itself; rules carry their own codes (see README).
UNKNOWN_FIELD = "KT001"
MISSING_FIELD = "KT002"
INVALID_VALUE = "KT003"

# Tags of a discriminated union's members start with this (`kind=hf`): pydantic puts the tag in an error's
# location, which is no field the user wrote, so paths leave it out.
UNION_TAG = "kind="


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, and how to put it right."""

    code: str
    path: str  # dotted field path inside the input, "" for the input as a whole
    message: str
    fix: str

    def format(self, where: str) -> str:
        location = f"{where}: {self.path}" if self.path else where
        return f"{location}: {self.message} [{self.code}] fix: {self.fix}"


class ConfigError(Exception):
    """Raised with every problem found in one input; the CLIs print them and exit 2."""

    def __init__(self, where: str, problems: list[Problem]):
        self.where = where
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [p.format(self.where) for p in self.problems]


def _text(value: str) -> str:
    """Strings that reach a file, a process's environment or its arguments: no NUL (the kernel ends a C string
    there, so execve refuses it and a path is cut short) and no lone surrogates (not encodable as UTF-8, so
    no YAML file or JSON request can carry them)."""
    if "\x00" in value:
        raise rule_violation(INVALID_VALUE, f"{value!r} contains a NUL byte", "remove the \\x00 character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise rule_violation(INVALID_VALUE, f"{value!r} is not valid Unicode text (a lone surrogate)",
                             "write the text as UTF-8 characters") from None
    return value


Text = Annotated[str, AfterValidator(_text)]


def rule_violation(code: str, message: str, fix: str, field: str = "") -> PydanticCustomError:
    """An error for a model validator to raise: pydantic keeps the code and the fix for us.

    `field` names the offending field when a model-level validator raises, so the path
    points at the field rather than at the model that holds it.
    """
    return PydanticCustomError(code, message, {"fix": fix, "field": field})


M = typing.TypeVar("M", bound=BaseModel)


def validate_model(model: type[M], raw: object, where: str, prefix: str = "") -> M:
    """`model.model_validate(raw)`, with failures raised as one ConfigError naming `where`."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(where, problems_from_validation_error(exc, model, prefix)) from None


@dataclass(frozen=True)
class Unreadable:
    """Stands in, during validation, for an input object that could not be read itself (a construct whose own
    props failed): the field refuses it, and its problem is this one instead of a type error."""

    code: str
    message: str
    fix: str


def problems_from_validation_error(
    error: ValidationError, model: type[BaseModel] | None = None, prefix: str = ""
) -> list[Problem]:
    """Turn pydantic's errors into Problems whose paths are relative to `prefix`."""
    problems = []
    unreadable: set[int] = set()
    details = error.errors(include_url=False)
    # A plain union's members each report: 'is-instance[ServiceAccount]', 'function-after[...]' are pydantic's
    # names for them, not the user's field path. Keep the field's path, and drop "is not an instance" when a
    # member that takes plain values said what is wrong with the value.
    for detail in details:
        detail["loc"] = tuple(part for part in detail["loc"] if not _union_member(part))
    said = {d["loc"] for d in details if d["type"] != "is_instance_of"}
    details = [d for d in details if d["type"] != "is_instance_of" or d["loc"] not in said]
    for detail in details:
        if isinstance(detail.get("input"), Unreadable):
            if id(detail["input"]) not in unreadable:  # a union's members each refuse it: once is enough
                unreadable.add(id(detail["input"]))
                loc = [str(part) for part in detail["loc"]]
                loc = loc[:next((i for i, part in enumerate(loc) if "[" in part), len(loc))]
                stand_in = detail["input"]
                problems.append(Problem(stand_in.code, ".".join(filter(None, [prefix, *loc])), stand_in.message,
                                        stand_in.fix))
            continue
        # pydantic marks a mapping's key that is wrong itself with a last '[key]': the path naming the key says it.
        loc = [str(part) for part in detail["loc"] if not str(part).startswith(UNION_TAG) and part != "[key]"]
        ctx = detail.get("ctx") or {}
        if ctx.get("field"):
            loc.append(ctx["field"])
        path = ".".join(filter(None, [prefix, *loc]))
        kind = detail["type"]
        if kind == REJECTED:  # a typed sub-model the user built with a mistake: its own problems, under this path
            problems += [Problem(p.code, ".".join(filter(None, [path, p.path])), p.message, p.fix)
                         for p in ctx["problems"]]
        elif kind.startswith("KT"):
            problems.append(Problem(kind, path, detail["msg"], ctx["fix"]))
        elif kind == "extra_forbidden":
            allowed = _field_names_at(model, detail["loc"][:-1]) if model else []
            guess = _near_field(loc[-1], allowed)
            action = f"did you mean '{guess[0]}'? rename it" if guess else "remove it"
            known = f"; fields here: {', '.join(allowed)}" if allowed else ""
            problems.append(Problem(UNKNOWN_FIELD, path, "unknown field", f"{action}{known}"))
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            tag = ctx["discriminator"].strip("'")
            expected = _tags_at(model, detail["loc"], tag) if model else []
            choices = f"one of {', '.join(expected)}" if expected else "the kind of this section"
            if kind == "union_tag_invalid":
                problems.append(Problem(INVALID_VALUE, f"{path}.{tag}", f"{ctx['tag']!r} is not a {tag} here",
                                        f"{did_you_mean(str(ctx.get('tag', '')), expected)}use {choices}"))
            else:
                problems.append(Problem(MISSING_FIELD, f"{path}.{tag}", "required field is missing (it says which "
                                        "of the forms this section is)", f"add '{tag}': {choices}"))
        elif kind == "missing":
            problems.append(Problem(MISSING_FIELD, path, "required field is missing", f"add '{loc[-1]}'"))
        elif kind == "is_instance_of" and isinstance(detail["input"], str):  # a construct's name for the construct
            problems.append(Problem(INVALID_VALUE, path, f"{detail['input']!r} is a name where a {ctx['class']} "
                                    "object is expected", f"pass the {ctx['class']} object itself: kubetrain takes "
                                    "objects, not their names"))
        elif _choices(kind, ctx) and isinstance(detail["input"], str):  # a value of a list: the near one
            choices = _choices(kind, ctx)
            problems.append(Problem(INVALID_VALUE, path, f"{detail['input']!r} is not one of {', '.join(choices)}",
                                    f"{did_you_mean(detail['input'], choices)}use one of {', '.join(choices)}"))
        else:
            fix = _FIXES.get(kind, lambda ctx: "change the value as the message says")(ctx)
            problems.append(Problem(INVALID_VALUE, path, f"{detail['msg']} (got {detail['input']!r})", fix))
    return _one_per_value(problems)


_CHOICES = re.compile(r"^\^\(([\w.-]+(?:\|[\w.-]+)+)\)\$$")  # ^(All|Running|None)$


def _choices(kind: str, ctx: dict[str, Any]) -> list[str]:
    """The values a Literal or an alternation pattern takes; [] for any other error."""
    if kind == "literal_error":
        return re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
    match = _CHOICES.match(str(ctx.get("pattern", ""))) if kind == "string_pattern_mismatch" else None
    return match[1].split("|") if match else []


# pydantic's names for the members of a plain union, as they appear in an error's loc
_UNION_MEMBERS = frozenset({"int", "str", "float", "bool", "none", "bytes", "decimal", "constrained-int",
                            "constrained-str", "constrained-float", "constrained-decimal", "constrained-bytes"})


def _union_member(part: object) -> bool:
    return isinstance(part, str) and part != "[key]" and ("[" in part or part in _UNION_MEMBERS)


def _one_per_value(problems: list[Problem]) -> list[Problem]:
    """The members of a union (`int | Literal['auto']`) each refuse a bad value: one problem that says every
    form the value may take."""
    merged: list[Problem] = []
    for problem in problems:
        last = merged[-1] if merged else None
        if last is not None and problem.code == last.code == INVALID_VALUE and problem.path == last.path:
            merged[-1] = Problem(INVALID_VALUE, last.path, f"{last.message}; or {problem.message}",
                                 f"{last.fix}, or {problem.fix}")
        else:
            merged.append(problem)
    return merged


# Names users bring from the tools they know (torchrun, the Kubeflow and Kubernetes APIs), which are not near ours.
_ALIASES = {"gpus": "accelerators", "gpu": "accelerators", "gpus_per_node": "accelerators", "nnodes": "nodes",
            "num_nodes": "nodes", "replicas": "nodes", "nproc_per_node": "procs_per_node",
            "num_proc_per_node": "procs_per_node", "lr": "learning_rate", "steps": "max_steps"}


def _near_field(name: str, allowed: list[str]) -> list[str]:
    """The field a misspelt one meant: a near name (British and American spellings differ by a letter or two),
    the snake_case of a camelCase name (as the Kubernetes API spells it), or a well-known alias."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    alias = _ALIASES.get(snake)
    if alias in allowed:
        return [alias]
    guess = closest(snake, allowed) or closest(name, allowed)
    return [guess] if guess else []


def _tags_at(model: type[BaseModel], loc: tuple, tag: str) -> list[str]:
    """The values the tag field of the tagged union at `loc` takes."""
    annotation: object = model
    for part in loc:
        members = _models_in(annotation)
        holder = next((m for m in members if isinstance(part, str) and part in m.model_fields), None)
        if holder is None:
            return []
        annotation = holder.model_fields[part].annotation
    return [str(value) for member in _models_in(annotation) if tag in member.model_fields
            for value in typing.get_args(member.model_fields[tag].annotation)]


_FIXES = {
    "is_instance_of": lambda ctx: f"pass a {ctx['class']} object (built in the fleet's code), not this value",
    "greater_than_equal": lambda ctx: f"use a value of at least {ctx['ge']}",
    "greater_than": lambda ctx: f"use a value above {ctx['gt']}",
    "less_than_equal": lambda ctx: f"use a value of at most {ctx['le']}",
    "less_than": lambda ctx: f"use a value below {ctx['lt']}",
    "literal_error": lambda ctx: f"use one of {ctx['expected']}",
    "string_too_short": lambda ctx: f"use at least {ctx['min_length']} character(s)",
    "too_short": lambda ctx: f"give at least {ctx['min_length']} item(s)",
    "string_pattern_mismatch": lambda ctx: f"use a value matching {ctx['pattern']}",
    "int_parsing": lambda ctx: "use a whole number",
    "int_type": lambda ctx: "use a whole number",
    "float_parsing": lambda ctx: "use a number",
    "bool_parsing": lambda ctx: "use true or false",
    "string_type": lambda ctx: "use a string (quote it in YAML)",
    "dict_type": lambda ctx: "use a mapping of key: value",
    "list_type": lambda ctx: "use a list",
    "model_type": lambda ctx: "use a mapping of this section's fields",
}


def _field_names_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the model found by following `loc` from `model` (best effort). A union's member is
    the one whose field holds the next part, or whose tag it is (pydantic puts a tagged union's tag in `loc`)."""
    annotation: object = model
    for part in loc:
        if str(part).startswith(UNION_TAG):  # a tagged union's member: the model whose kind the tag names
            kind = str(part)[len(UNION_TAG):]
            annotation = next((arg for arg in _models_in(annotation)
                               if getattr(arg.model_fields.get("kind"), "default", None) == kind
                               or typing.get_args(arg.model_fields["kind"].annotation) == (kind,)), None)
            continue
        members = _models_in(annotation)
        if not members:
            if isinstance(part, int) or typing.get_origin(annotation) in (dict, list):
                annotation = typing.get_args(annotation)[-1] if typing.get_args(annotation) else None
                continue
            return []
        if isinstance(part, int):
            continue
        holder = next((m for m in members if part in m.model_fields), None)
        if holder is not None:
            annotation = holder.model_fields[part].annotation
            continue
        tagged = [m for m in members if any(part in typing.get_args(f.annotation) for f in m.model_fields.values()
                                            if typing.get_origin(f.annotation) is typing.Literal)]
        if len(tagged) != 1:
            return []
        annotation = tagged[0]
    found = _models_in(annotation)
    return sorted(found[0].model_fields) if found else []


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        return [found for arg in typing.get_args(annotation) for found in _models_in(arg)]
    return []


# -- typed props that report like dicts ---------------------------------------------------------

REJECTED = "kubetrain_rejected"  # the error type that carries problems found before validation


@dataclass
class Rejection:
    """Why a typed model built from keywords is invalid: its problems (paths relative to it), the keywords it
    was given, and where in the user's code it was built. `claimed` once a parent model or a construct has
    taken it over and reports its problems under its own name."""

    model: str
    problems: list[Problem]
    fields: dict[str, Any]
    origin: str
    claimed: bool = field(default=False)

    @property
    def where(self) -> str:
        return f"{self.model} built at {self.origin}"


_UNCLAIMED: list[Rejection] = []


def model_named(name: str) -> type[ReportedLater] | None:
    """The typed model class of that name (a ValidationError names its model only by name)."""
    pending: list[type[ReportedLater]] = [ReportedLater]
    while pending:
        cls = pending.pop()
        if cls.__name__ == name:
            return cls
        pending += cls.__subclasses__()
    return None


def rejection_of(value: object) -> Rejection | None:
    """The Rejection of a model built with a mistake, None for anything else."""
    return getattr(value, "__dict__", {}).get(REJECTED) if isinstance(value, ReportedLater) else None


def unclaimed_rejections() -> list[Rejection]:
    """Invalid models that nothing took over since the last call (built, then never given to a construct)."""
    found = [r for r in _UNCLAIMED if not r.claimed]
    _UNCLAIMED.clear()
    return found


class ReportedLater(BaseModel):
    """A model whose keyword constructor does not raise on bad input.

    `NodeResources(cpu="2", memroy="4Gi")` in a fleet module would otherwise stop the whole fleet with a
    pydantic traceback at the user's call, before any construct could name the job it belongs to. Instead
    the instance keeps its problems (a `Rejection`): a parent model that is given it reports them under the
    field's path (`resources.memroy`), a construct that is given it reports them under its own name and
    emits nothing, and synth reports every problem of the fleet in one round. Any other use of a rejected
    instance raises a ConfigError with its problems. `model_validate` still raises, as pydantic's does.
    """

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            rejection = Rejection(type(self).__name__, problems_from_validation_error(error, type(self)), data,
                                  _caller())
            for name, value in (("__pydantic_fields_set__", set()), ("__pydantic_extra__", None),
                                ("__pydantic_private__", None)):
                object.__setattr__(self, name, value)
            # Plain defaults stay readable: a tagged union finds its tag (`kind`) and reaches this model's
            # own validator, which reports the problems under the parent's field.
            self.__dict__.update({name: info.default for name, info in type(self).model_fields.items()
                                  if info.default is not PydanticUndefined and info.default_factory is None})
            self.__dict__[REJECTED] = rejection
            _UNCLAIMED.append(rejection)

    # Validation (model_validate, a dict in a parent's field) builds instances without calling __init__, as it
    # does for BaseModel's own, so it still raises: only a keyword constructor in the user's code defers.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_rejected(cls, value: Any, handler: Any) -> Any:
        rejection = rejection_of(value)
        if rejection is not None:
            rejection.claimed = True
            raise PydanticCustomError(REJECTED, "invalid", {"problems": rejection.problems})
        return handler(value)

    def __getattr__(self, name: str) -> Any:
        rejection = self.__dict__.get(REJECTED)
        if rejection is not None and name in type(self).model_fields:
            rejection.claimed = True
            raise ConfigError(rejection.where, rejection.problems)
        return super().__getattr__(name)  # type: ignore[misc]

    def __repr__(self) -> str:
        rejection = self.__dict__.get(REJECTED)
        return f"{type(self).__name__}(<invalid: {len(rejection.problems)} problem(s)>)" if rejection else \
            super().__repr__()


_OWN_FILES = (os.path.join("training", "problems.py"), f"{os.sep}pydantic{os.sep}")


def _caller() -> str:
    """`file:line` of the user's code that built the model (the first frame outside pydantic and this module)."""
    frame = sys._getframe(2)
    # A model's own __init__ (one that takes an argument positionally) is not where the user built it.
    while frame is not None and (any(part in frame.f_code.co_filename for part in _OWN_FILES) or (
            frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), ReportedLater))):
        frame = frame.f_back
    if frame is None:
        return "?"
    filename = frame.f_code.co_filename
    relative = os.path.relpath(filename) if not os.path.relpath(filename).startswith("..") else filename
    return f"{relative}:{frame.f_lineno}"
