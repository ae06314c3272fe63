"""Configuration problems: one shape for every bad-input report.

The compiler (when it builds YAML) and the runtime (when a pod starts) validate the same
models, so they share how a problem is described and printed: a rule code, the field path,
what is wrong and how to fix it. This module imports neither torch nor cdk8s.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

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


def problems_from_validation_error(
    error: ValidationError, model: type[BaseModel] | None = None, prefix: str = ""
) -> list[Problem]:
    """Turn pydantic's errors into Problems whose paths are relative to `prefix`."""
    problems = []
    for detail in error.errors(include_url=False):
        loc = [str(part) for part in detail["loc"]]
        ctx = detail.get("ctx") or {}
        if ctx.get("field"):
            loc.append(ctx["field"])
        path = ".".join(filter(None, [prefix, *loc]))
        kind = detail["type"]
        if kind.startswith("KT"):
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
