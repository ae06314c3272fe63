"""Kubernetes name rules (and paths in a pod) as pydantic types, with messages that say what a valid one looks like."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated

from pydantic import AfterValidator

from training.problems import INVALID_VALUE, rule_violation

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# registry/path:tag@digest, after the reference grammar of the distribution project (simplified:
# components are lowercase, a tag is 1-128 word characters, '.' or '-', not starting with them).
_IMAGE = re.compile(r"^(?P<name>[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+(?=/))?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*)"
                    r"(:(?P<tag>[\w][\w.-]{0,127}))?(@(?P<digest>[a-z0-9]+:[a-f0-9]{32,}))?$")


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


def _dns_1123_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1123 subdomain",
                             "use at most 253 lowercase letters, digits, '-' and '.', starting and ending with a "
                             "letter or digit")
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid environment variable name",
                             "use letters, digits, '_', '-' and '.', not starting with a digit")
    return value


def _qualified_name(value: str) -> str:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', then a name of <= 63."""
    prefix, _, name = value.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or not name or len(name) > 63 \
            or not _LABEL_NAME.match(name):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid label or annotation key",
                             "use an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' and '.', "
                             "starting and ending with a letter or digit (e.g. example.com/team)")
    return value


def _label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_NAME.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid label value",
                             "use at most 63 letters, digits, '-', '_' and '.', starting and ending with a "
                             "letter or digit (or an empty string)")
    return value


def _image(value: str) -> str:
    if not _IMAGE.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a container image reference",
                             "write registry/repository:tag (e.g. ghcr.io/org/trainer:1.2.0), lowercase, "
                             "with a non-empty tag or an @sha256: digest")
    return value


def image_tag(image: str) -> str | None:
    """The tag of a valid image reference, None when it has none."""
    match = _IMAGE.match(image)
    return match.group("tag") if match else None


def image_digest(image: str) -> str | None:
    match = _IMAGE.match(image)
    return match.group("digest") if match else None


Dns1035Label = Annotated[str, AfterValidator(_dns_1035_label)]
"""Names of Services and of the objects whose names become Service names (training jobs)."""

Dns1123Label = Annotated[str, AfterValidator(_dns_1123_label)]
"""Names of namespaces and volumes."""

Dns1123Subdomain = Annotated[str, AfterValidator(_dns_1123_subdomain)]
"""Names of most objects: claims, ConfigMaps, Secrets, service accounts, priority classes."""

EnvName = Annotated[str, AfterValidator(_env_name)]
LabelKey = Annotated[str, AfterValidator(_qualified_name)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
ImageRef = Annotated[str, AfterValidator(_image)]


def _absolute(path: str) -> str:
    if not PurePosixPath(path).is_absolute():
        raise rule_violation(INVALID_VALUE, f"{path!r} is not an absolute path", "start the path with '/'")
    if any(part in (".", "..") for part in path.split("/")):
        raise rule_violation(INVALID_VALUE, f"{path!r} has '.' or '..' segments",
                             "write the path without them, as it resolves")
    return path


AbsolutePath = Annotated[str, AfterValidator(_absolute)]
"""A path in a container or on a file system: relative ones would depend on a working directory."""


_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _port_name(value: str) -> str:
    """IANA_SVC_NAME, as the API server checks a port's name: 1-15 lowercase letters, digits and '-', with a
    letter, no '--'."""
    if value.isdigit():
        raise rule_violation(INVALID_VALUE, f"{value!r} is a port number; this field names a container port",
                             "use the port's name (kubetrain's trainer names its first metrics port 'metrics')")
    if len(value) > 15 or not _PORT_NAME.match(value) or "--" in value or not any(c.isalpha() for c in value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a port name",
                             "use 1-15 lowercase letters, digits and '-', with at least one letter, e.g. metrics")
    return value


PortName = Annotated[str, AfterValidator(_port_name)]
"""A container port's name (IANA_SVC_NAME), where Kubernetes and Prometheus refer to a port by name."""

_PROMETHEUS_DURATION = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
                                  r"(([0-9]+)ms)?$")


def _prometheus_duration(value: str) -> str:
    if not value or not _PROMETHEUS_DURATION.match(value) or not any(c in "123456789" for c in value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a positive Prometheus duration",
                             "write units from largest to smallest, e.g. 30s, 1m30s, 500ms")
    return value


PrometheusDuration = Annotated[str, AfterValidator(_prometheus_duration)]
