"""The base of every user-facing input model: unknown fields are errors and values do not change after validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from kubetrain_runtime.problems import ReportedLater, Unreadable, rejection_of

REJECTED_REFERENCE = "KT011"  # registered with the platform constructs (kubetrain.platform.platform_construct)


class StrictProps(ReportedLater):
    """Unknown fields are errors, values do not change after validation, and a mistake made when building one
    with keywords is reported by whatever construct takes it, with the field path (see ReportedLater)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_rejected_constructs(cls, data: Any) -> Any:
        # A construct whose own props could not be read has none: the validators here must never read it, and
        # what is built on it cannot be checked. Each field that holds one refuses a stand-in (KT011) instead,
        # and the other fields are still checked.
        if isinstance(data, Mapping):
            return {key: _stand_in(value) for key, value in data.items()}
        return data


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


def _stand_in(value: Any) -> Any:
    """A rejected construct as an Unreadable, one level into lists and mappings (a queue's flavors, a
    monitor's pools)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_stand_in(item) for item in value)
    if isinstance(value, Mapping) and not isinstance(value, BaseModel):
        return {key: _stand_in(item) for key, item in value.items()}
    if getattr(value, "rejected", False) is True:
        return Unreadable(REJECTED_REFERENCE, f"{value.where} has errors of its own (reported with it)",
                          "fix the errors reported for the construct it names; this one is checked again then")
    return value
