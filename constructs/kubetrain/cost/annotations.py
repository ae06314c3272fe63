"""The cost inputs that Kubernetes fields do not carry, as annotations on the emitted objects, so that the cost
of any revision of dist/ can be read from dist/ alone.

- `kubetrain.dev/estimate` on a job's run object: its Estimate (kubetrain.cost.cost_props) as JSON, the fields the
  job set (assumptions; a command job's work).
- `kubetrain.dev/accelerator-peak-flops` on a job's run object: the dense bf16 peak of its accelerators when its
  instance type is not the built-in catalog's (a fleet's own InstanceType).
- `kubetrain.dev/pricing` on a NodePool: its PoolPricing as JSON, reserved_nodes resolved.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from kubetrain.cost.cost_props import Estimate, PoolPricing
from kubetrain_runtime.problems import problems_from_validation_error

ESTIMATE = "kubetrain.dev/estimate"
PEAK_FLOPS = "kubetrain.dev/accelerator-peak-flops"
PRICING = "kubetrain.dev/pricing"


def encode(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json", exclude_unset=True), sort_keys=True, separators=(",", ":"))


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


# Every kubetrain.dev/* annotation is synth's output: a value that cannot be read was edited by hand in dist/.
ANNOTATION_FIX = ("dist/ is written by `kubetrain synth` from the fleet's code, kubetrain.dev/* annotations included: "
                  "set the value there (the construct's props) and run synth, or undo the hand edit "
                  "(`git checkout -- dist/`)")


class CostInputError(ValueError):
    """dist/ holds something the estimate cannot read (an annotation or a run config edited into nonsense): one
    line for the user."""


def _decode(obj: dict[str, Any], key: str, model: type[BaseModel]) -> Any:
    text = annotations_of(obj).get(key)
    if text is None:
        return None
    where = f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}: annotation {key}"
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CostInputError(f"{where}: {text!r} is not JSON ({error.msg} at column {error.colno}); fix: "
                             f"{ANNOTATION_FIX}") from None
    try:
        return model.model_validate(value)
    except ValidationError as error:
        problems = "; ".join(f"{p.path or '(value)'}: {p.message} ({p.fix})"
                             for p in problems_from_validation_error(error, model))
        raise CostInputError(f"{where}: {problems}; fix: {ANNOTATION_FIX}") from None


def estimate_of(obj: dict[str, Any]) -> Estimate | None:
    return _decode(obj, ESTIMATE, Estimate)


def pricing_of(obj: dict[str, Any]) -> PoolPricing | None:
    return _decode(obj, PRICING, PoolPricing)


def peak_flops_of(obj: dict[str, Any]) -> float | None:
    text = annotations_of(obj).get(PEAK_FLOPS)
    try:
        return float(text) if text is not None else None
    except ValueError:
        raise CostInputError(f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}: annotation {PEAK_FLOPS} "
                             f"is {text!r}, not a number of FLOP/s; fix: {ANNOTATION_FIX}") from None
