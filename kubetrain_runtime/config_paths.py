"""The files and folders a run config names, declared on their fields: what a run reads, what it writes.

A field that holds a path carries `json_schema_extra=READS` or `WRITES`; `config_paths` finds every one set in a
config, nested sections included, so a check of where paths lie (the compiler's, against the job's volumes) covers
a path field the day it is declared.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel

PATH_USE = "x-kubetrain-path"  # the key in a field's JSON schema
READS = {PATH_USE: "reads"}
WRITES = {PATH_USE: "writes"}


@dataclass(frozen=True)
class ConfigPath:
    field: str  # the dotted field path in the config
    path: str
    writes: bool


def path_use(model: type[BaseModel], name: str) -> str | None:
    """"reads", "writes" or None: what the field `name` of `model` declares."""
    extra = model.model_fields[name].json_schema_extra
    return extra.get(PATH_USE) if isinstance(extra, dict) else None


def config_paths(config: BaseModel, prefix: str = "") -> Iterator[ConfigPath]:
    """Every path field of `config` that is set, in declaration order."""
    for name in type(config).model_fields:
        value = getattr(config, name)
        use = path_use(type(config), name)
        if use is not None and isinstance(value, str):
            yield ConfigPath(prefix + name, value, use == "writes")
        elif isinstance(value, BaseModel):
            yield from config_paths(value, f"{prefix}{name}.")
