"""Kubernetes name rules as pydantic types, with messages that say what a valid name looks like."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from training.problems import INVALID_VALUE, rule_violation

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def _dns_1035_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value) or not value[0].isalpha():
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1035 label",
                             "use at most 63 lowercase letters, digits and '-', starting with a letter "
                             "and ending with a letter or digit")
    return value


def _dns_1123_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1123 label",
                             "use at most 63 lowercase letters, digits and '-', starting and ending with a "
                             "letter or digit")
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid environment variable name",
                             "use letters, digits, '_', '-' and '.', not starting with a digit")
    return value


Dns1035Label = Annotated[str, AfterValidator(_dns_1035_label)]
"""Names of Services and of the objects whose names become Service names (training jobs)."""

Dns1123Label = Annotated[str, AfterValidator(_dns_1123_label)]
"""Names of namespaces and volumes."""

EnvName = Annotated[str, AfterValidator(_env_name)]
