"""The base of every user-facing input model: unknown fields are errors and values do not change after validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from training.problems import ReportedLater, rejection_of


class StrictProps(ReportedLater):
    """Unknown fields are errors, values do not change after validation, and a mistake made when building one
    with keywords is reported by whatever construct takes it, with the field path (see ReportedLater)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def as_fields(props: BaseModel | Mapping[str, Any] | None) -> dict[str, Any]:
    """A construct's props as fields to validate again with its id and keywords: a props object's fields as
    the user set them (nested objects kept as objects), or a dict as given."""
    if props is None:
        return {}
    rejection = rejection_of(props)
    if rejection is not None:  # built with a mistake: validated again here, so its problems carry the job's name
        rejection.claimed = True
        return dict(rejection.fields)
    if isinstance(props, BaseModel):
        return {name: getattr(props, name) for name in props.model_fields_set}
    return dict(props)
