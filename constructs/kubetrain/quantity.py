"""Kubernetes resource quantities ("500m", "16Gi", "1e3"), parsed so rules can compare them."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from training.problems import INVALID_VALUE, rule_violation

_SUFFIXES = {
    "": 1, "m": Decimal("0.001"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(text: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes); ValueError when it is not a quantity."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 4, 16Gi)")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 4, 16Gi)") from None
    return number * _SUFFIXES[match.group(2) or ""]


def check_quantity(text: str) -> str:
    """Pydantic validator: accept a quantity string unchanged."""
    try:
        parse_quantity(text)
    except ValueError as exc:
        raise rule_violation(INVALID_VALUE, str(exc), "write a number with an optional unit: 500m, 4, 16Gi") from None
    return text
