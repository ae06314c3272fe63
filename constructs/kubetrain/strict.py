"""The base of every user-facing input model: unknown fields are errors and values do not change after validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictProps(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def as_fields(props: BaseModel | Mapping[str, Any] | None) -> dict[str, Any]:
    """A construct's props as fields to validate again with its id and keywords: a props object's fields as
    the user set them (nested objects kept as objects), or a dict as given."""
    if props is None:
        return {}
    if isinstance(props, BaseModel):
        return {name: getattr(props, name) for name in props.model_fields_set}
    return dict(props)
