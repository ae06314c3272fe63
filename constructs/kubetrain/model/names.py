"""Kubernetes name rules (and paths in a pod), as plain checks and as pydantic types, with messages that say what a
valid one looks like.

The checks are apimachinery's (k8s.io/apimachinery v0.33, pkg/util/validation/validation.go): each returns
None for a valid value, else what is wrong. The pydantic types below refuse input with them (KT003); the
output check (kubetrain.apiserver) applies them to every emitted object.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Annotated

from pydantic import AfterValidator

from kubetrain_runtime.problems import INVALID_VALUE, rule_violation

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_PORT_NAME = re.compile(r"^[-a-z0-9]+$")
_CONFIG_MAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_PRINTABLE_ASCII_BUT_EQUALS = re.compile(r"^[ -<>-~]+$")  # 0x20-0x7e without '=' (0x3d)
# registry/path:tag@digest, after the reference grammar of the distribution project (simplified:
# components are lowercase, a tag is 1-128 word characters, '.' or '-', not starting with them).
_IMAGE = re.compile(r"^(?P<name>[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+(?=/))?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*)"
                    r"(:(?P<tag>[\w][\w.-]{0,127}))?(@(?P<digest>[a-z0-9]+:[a-f0-9]{32,}))?$")

LABEL_VALUE_MAX = 63  # also the longest DNS label, hence of every name that becomes a hostname or label


# -- apimachinery's checks: None when valid, else the problem ------------------------------------------

@lru_cache(maxsize=8192)
def dns_1123_label_problem(value: str) -> str | None:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        return (f"{value!r} is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and "
                "ending with a letter or digit)")
    return None


@lru_cache(maxsize=8192)
def dns_1035_label_problem(value: str) -> str | None:
    if len(value) > 63 or not _DNS_1035.match(value):
        return (f"{value!r} is not a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a "
                "letter and ending with a letter or digit)")
    return None


@lru_cache(maxsize=8192)
def dns_1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return (f"{value!r} is not a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.', "
                "starting and ending with a letter or digit)")
    return None


@lru_cache(maxsize=8192)
def qualified_name_problem(value: str) -> str | None:
    """A label key, annotation key (lowercased first), taint or toleration key, finalizer, resource name:
    an optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or "/" in prefix or dns_1123_subdomain_problem(prefix)):
        return (f"{value!r} is not a qualified name: its prefix before '/' must be a DNS subdomain "
                "(e.g. example.com/name)")
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (f"{value!r} is not a qualified name: the name part must be 1-63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


@lru_cache(maxsize=8192)
def label_value_problem(value: str) -> str | None:
    if len(value) > LABEL_VALUE_MAX or not _LABEL_NAME.match(value):
        return (f"{value!r} is not a valid label value (at most 63 letters, digits, '-', '_' and '.', starting and "
                "ending with a letter or digit, or empty)")
    return None


@lru_cache(maxsize=1024)
def port_name_problem(value: str) -> str | None:
    """IANA_SVC_NAME: what a container port's name (and a Service's targetPort by name) must be."""
    if (len(value) > 15 or not _PORT_NAME.match(value) or not any("a" <= c <= "z" for c in value)
            or "--" in value or value.startswith("-") or value.endswith("-")):
        return (f"{value!r} is not a port name (IANA_SVC_NAME: at most 15 lowercase letters, digits and '-', with at "
                "least one letter, no '--', not starting or ending with '-')")
    return None


@lru_cache(maxsize=4096)
def env_name_problem(value: str, relaxed: bool = True) -> str | None:
    """Kubernetes 1.32+ (RelaxedEnvironmentVariableValidation, on by default) takes any printable ASCII but
    '='; older API servers a C-identifier-like name."""
    if relaxed and not _PRINTABLE_ASCII_BUT_EQUALS.match(value):
        return f"{value!r} is not an environment variable name (printable ASCII characters other than '=')"
    if not relaxed and not _ENV_NAME.match(value):
        return (f"{value!r} is not an environment variable name (letters, digits, '_', '-' and '.', not starting "
                "with a digit)")
    return None


@lru_cache(maxsize=4096)
def config_map_key_problem(value: str) -> str | None:
    if len(value) > 253 or not _CONFIG_MAP_KEY.match(value) or value in (".", "..") or value.startswith(".."):
        return (f"{value!r} is not a ConfigMap or Secret key (at most 253 letters, digits, '-', '_' and '.', not "
                "'.', '..' or starting with '..')")
    return None


def path_segment_problem(value: str) -> str | None:
    """Names that go into a URL path as one segment (RBAC objects)."""
    if value in (".", "..") or "/" in value or "%" in value:
        return f"{value!r} may not be '.' or '..' or contain '/' or '%'"
    return None


# -- pydantic types for input ---------------------------------------------------------------------------

def _env_name(value: str) -> str:
    # kubetrain keeps the older, stricter rule: every API server version accepts it, and the launcher's
    # shell can read such a name.
    if not _ENV_NAME.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid environment variable name",
                             "use letters, digits, '_', '-' and '.', not starting with a digit")
    return value


def _annotation_key(value: str) -> str:
    # The API server checks annotation keys lowercased (apimachinery ValidateAnnotations).
    problem = qualified_name_problem(value.lower())
    if problem:
        raise rule_violation(INVALID_VALUE, problem, "use an optional DNS prefix and '/', then at most 63 letters, "
                             "digits, '-', '_' and '.' (e.g. example.com/owner)")
    return value


def _dns_1035_label(value: str) -> str:
    if dns_1035_label_problem(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1035 label",
                             "use at most 63 lowercase letters, digits and '-', starting with a letter "
                             "and ending with a letter or digit")
    return value


def _dns_1123_label(value: str) -> str:
    if dns_1123_label_problem(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1123 label",
                             "use at most 63 lowercase letters, digits and '-', starting and ending with a "
                             "letter or digit")
    return value


def _dns_1123_subdomain(value: str) -> str:
    if dns_1123_subdomain_problem(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a DNS-1123 subdomain",
                             "use at most 253 lowercase letters, digits, '-' and '.', starting and ending with a "
                             "letter or digit")
    return value


def _qualified_name(value: str) -> str:
    """A label key, toleration or taint key: an optional DNS-subdomain prefix and '/', then a name of <= 63."""
    if qualified_name_problem(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a valid label or annotation key",
                             "use an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' and '.', "
                             "starting and ending with a letter or digit (e.g. example.com/team)")
    return value


def _label_value(value: str) -> str:
    if label_value_problem(value):
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
"""Label keys, taint and toleration keys, node-selector keys."""

AnnotationKey = Annotated[str, AfterValidator(_annotation_key)]
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


def _port_name(value: str) -> str:
    """IANA_SVC_NAME, as the API server checks a port's name (port_name_problem)."""
    if value.isdigit():
        raise rule_violation(INVALID_VALUE, f"{value!r} is a port number; this field names a container port",
                             "use the port's name (kubetrain's trainer names its first metrics port 'metrics')")
    if port_name_problem(value):
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
