"""Configuration problems: one shape for every bad-input report.

The compiler (when it builds YAML) and the runtime (when a pod starts) validate the same
models, so they share how a problem is described and printed: a rule code, the field path,
what is wrong and how to fix it. This module imports neither torch nor cdk8s.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ValidationError, model_validator
from pydantic_core import PydanticCustomError, PydanticUndefined

# Codes for problems found by the schema itself; rules carry their own codes (see README).
UNKNOWN_FIELD = "KT001"
MISSING_FIELD = "KT002"
INVALID_VALUE = "KT003"


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
    for detail in error.errors(include_url=False):
        if isinstance(detail.get("input"), Unreadable):
            if id(detail["input"]) not in unreadable:  # a union's members each refuse it: once is enough
                unreadable.add(id(detail["input"]))
                loc = [str(part) for part in detail["loc"]]
                loc = loc[:next((i for i, part in enumerate(loc) if "[" in part), len(loc))]
                stand_in = detail["input"]
                problems.append(Problem(stand_in.code, ".".join(filter(None, [prefix, *loc])), stand_in.message,
                                        stand_in.fix))
            continue
        loc = [str(part) for part in detail["loc"]]
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
            guess = difflib.get_close_matches(loc[-1], allowed, n=1)
            hint = f"did you mean '{guess[0]}'? " if guess else ""
            known = f"; fields here: {', '.join(allowed)}" if allowed else ""
            problems.append(Problem(UNKNOWN_FIELD, path, "unknown field", f"{hint}remove it{known}"))
        elif kind == "missing":
            problems.append(Problem(MISSING_FIELD, path, "required field is missing", f"add '{loc[-1]}'"))
        else:
            fix = _FIXES.get(kind, lambda ctx: "change the value as the message says")(ctx)
            problems.append(Problem(INVALID_VALUE, path, f"{detail['msg']} (got {detail['input']!r})", fix))
    return problems


_FIXES = {
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
    """The field names of the model found by following `loc` from `model` (best effort)."""
    annotation: object = model
    for part in loc:
        sub = _model_in(annotation)
        if sub is None:
            if isinstance(part, int) or typing.get_origin(annotation) in (dict, list):
                annotation = typing.get_args(annotation)[-1] if typing.get_args(annotation) else None
                continue
            return []
        if isinstance(part, int):
            continue
        field = sub.model_fields.get(part)
        if field is None:
            return []
        annotation = field.annotation
    found = _model_in(annotation)
    return sorted(found.model_fields) if found else []


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found:
                return found
    return None


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
