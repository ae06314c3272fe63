"""The base of every user-facing input model: unknown fields are errors and values do not change after validation."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictProps(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
