"""Kubernetes resource quantities ("500m", "16Gi", "1e3"), parsed so rules can compare them.

The grammar is the API server's (`resource.Quantity`): a signed decimal number and an optional
binary (Ki..Ei), decimal (n, u, m, k..E) or exponent (e3) suffix. The API server stores a quantity
as a 64-bit integer of its smallest unit, so kubetrain refuses what it could not hold instead of
letting it be capped or rounded behind the user's back.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Annotated

from pydantic import AfterValidator

from kubetrain.model.vocabulary import EXTENDED_RESOURCES, HUGE_PAGES_RESOURCE
from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_CORE_VALIDATION
from kubetrain_runtime.problems import INVALID_VALUE, rule_violation
from kubetrain_runtime.spelling import did_you_mean

_SUFFIXES = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("0.001"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,4})?$")
MAX_QUANTITY = Decimal(2**63 - 1)
EXAMPLES = "examples: 500m, 4, 16Gi"


# Exact arithmetic: a quantity keeps every digit, whatever its exponent (the API server's inf.Dec does too).
EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def exact_quantity(text: str) -> Decimal:
    """The exact value of a quantity in the API server's grammar, of any sign and size (as
    `resource.ParseQuantity` reads it); ValueError when it does not parse."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity ({EXAMPLES})")
    number = Decimal(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix[:1] in ("e", "E"):
        return number.scaleb(int(suffix[1:]), EXACT)
    return EXACT.multiply(number, _SUFFIXES[suffix])


def parse_quantity(text: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes); ValueError when it is not a quantity
    the API server can hold."""
    value = exact_quantity(str(text).strip())
    if value < 0:
        raise ValueError(f"{text!r} is negative")
    if value > MAX_QUANTITY:
        raise ValueError(f"{text!r} is larger than the API server can hold (2^63-1)")
    return value


def check_quantity(text: str) -> str:
    """Pydantic validator: a quantity string, kept unchanged."""
    try:
        value = parse_quantity(text)
    except ValueError as exc:
        raise rule_violation(INVALID_VALUE, str(exc), f"write a number with an optional unit ({EXAMPLES})") from None
    if value != value.quantize(Decimal("0.001")):
        raise rule_violation(INVALID_VALUE, f"{text!r} has more precision than the API server keeps (1m)",
                             "round it to at most 3 decimal places of the base unit, e.g. 1500m")
    return text


def check_positive_byte_quantity(text: str) -> str:
    """Pydantic validator: a size in whole bytes, above zero (a volume's capacity)."""
    check_byte_quantity(text)
    if not parse_quantity(text):
        raise rule_violation(INVALID_VALUE, f"{text!r} is no size: a volume's capacity is greater than zero",
                             "use a size such as 1Ti")
    return text


def check_byte_quantity(text: str) -> str:
    """Pydantic validator: a size in whole bytes (memory, huge pages, volumes)."""
    check_quantity(text)
    if parse_quantity(text) % 1:
        raise rule_violation(INVALID_VALUE, f"{text!r} is not a whole number of bytes",
                             "use a binary unit such as 512Mi or 16Gi")
    return text


HUGE_PAGES = register(
    "KT132", "error", "huge pages that are not a whole number of pages",
    rationale="Huge pages are reserved in pages of their size: the API server refuses a hugepages-2Mi request that "
              "is not a multiple of 2Mi (and a hugepages-1Gi one not a multiple of 1Gi), so the pod is never created.",
    fix="use a multiple of the page size, e.g. 5120Mi for 2Mi pages",
    source=K8S_CORE_VALIDATION)


def huge_pages_problem(resource: str, amount: str | float) -> str | None:
    """Why `amount` of the huge-pages `resource` (hugepages-<size>) is refused, None when it is a whole number
    of pages (apimachinery's IsHugePageResourceValueDivisible)."""
    try:
        size = parse_quantity(resource[len("hugepages-"):]) if resource.startswith("hugepages-") else None
    except ValueError:
        size = None
    if not size or size % 1:
        return f"{resource!r} names no page size (hugepages-2Mi, hugepages-1Gi)"
    if parse_quantity(amount) % size:
        return f"{amount} is not a whole multiple of the {resource[len('hugepages-'):]} page size"
    return None


def check_huge_pages_2mi(text: str) -> str:
    """Pydantic validator: 2 MiB huge pages, a whole number of pages."""
    check_byte_quantity(text)
    problem = huge_pages_problem(HUGE_PAGES_RESOURCE, text)
    if problem:
        raise rule_violation(HUGE_PAGES.code, problem, "use a multiple of 2Mi, e.g. 5120Mi")
    return text


HugePages2Mi = Annotated[str, AfterValidator(check_huge_pages_2mi)]
PositiveByteQuantity = Annotated[str, AfterValidator(check_positive_byte_quantity)]


def format_quantity(resource: str, amount: Decimal) -> str:
    """An amount as a quantity: millicores for fractional cpu, whole base units otherwise (rounded down)."""
    if resource == "cpu":
        return f"{int(amount * 1000)}m" if amount % 1 else str(int(amount))
    return str(int(amount))


Quantity = Annotated[str, AfterValidator(check_quantity)]  # a props field holding a quantity, kept as written
ByteQuantity = Annotated[str, AfterValidator(check_byte_quantity)]


def format_bytes(value: Decimal | int) -> str:
    """A byte count as people write it in a pod spec: the largest binary unit that keeps one decimal."""
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        scaled = Decimal(value) / _SUFFIXES[unit]
        if scaled >= 1:
            return f"{scaled:.1f}".removesuffix(".0") + unit
    return f"{value:f}"


# Resource names without a domain prefix are Kubernetes' own (k8s.io/api core/v1 ResourceName constants);
# every other one (nvidia.com/gpu, vpc.amazonaws.com/efa) carries its vendor's domain.
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods"})


# What a node of the fleet's pools offers: Kubernetes' own resources, huge pages, and the device plugins'.
NODE_RESOURCES = (*sorted(STANDARD_RESOURCES), HUGE_PAGES_RESOURCE, *EXTENDED_RESOURCES)


def node_resource_problem(name: str) -> tuple[str, str] | None:
    """(what is wrong, the fix) for a resource name no node of the fleet offers (a quota on `nvidia.com/gpus`
    would cover nothing any pod requests); None for one a node offers."""
    if name in STANDARD_RESOURCES or name in EXTENDED_RESOURCES:
        return None
    if name.startswith("hugepages-"):
        try:
            if parse_quantity(name.removeprefix("hugepages-")) > 0:
                return None
        except ValueError:
            pass
    return (f"{name!r} is no resource a node offers",
            f"{did_you_mean(name, NODE_RESOURCES)}use one of {', '.join(NODE_RESOURCES)} (or another hugepages-<size>)")


def check_node_resource(name: str) -> str:
    """Pydantic validator: a resource name a node of the fleet offers (node_resource_problem)."""
    problem = node_resource_problem(name)
    if problem:
        raise rule_violation(INVALID_VALUE, *problem)
    return name


NodeResourceName = Annotated[str, AfterValidator(check_node_resource)]
