"""Manifests as YAML text: block style, no aliases, multi-line strings as literal blocks.

PyYAML turns data into a node tree (its representer, in Python) and libyaml writes the nodes (its
emitter, in C). At fleet scale the representer was most of the cost, so `dump_manifest` builds the
node tree itself for the types a rendered object holds (dict, list, str, int, float, bool, None):
the same nodes PyYAML's SafeRepresenter would build, handed to the same emitter, hence the same
bytes (a test compares both on every object of the fleet and on tricky scalars). Any other type
goes through PyYAML's representer. The resolver's verdict on a scalar (which decides whether it
needs quotes) is cached, since manifests repeat the same keys and values many times.
"""

from __future__ import annotations

import io
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

_STR, _INT, _FLOAT = "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_BOOL, _NULL = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class ManifestDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml's emitter where it exists
    """Block style, no aliases, multi-line strings (embedded configs) as literal blocks."""

    _resolved: dict[tuple[str, tuple[bool, bool]], str] = {}

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is not ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            if len(self._resolved) > 100_000:  # a bound, for long-lived processes
                self._resolved.clear()
            tag = self._resolved[key] = super().resolve(kind, value, implicit)
        return tag


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar(_STR, value, style=style)


ManifestDumper.add_representer(str, _str_representer)


def _float_text(value: float) -> str:
    """SafeRepresenter.represent_float's text."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text


def _node(dumper: ManifestDumper, value: Any) -> yaml.Node:
    kind = type(value)
    if kind is str:
        return ScalarNode(_STR, value, style="|" if "\n" in value else None)
    if kind is dict:
        return MappingNode(_MAP, [(_node(dumper, k), _node(dumper, v)) for k, v in value.items()], flow_style=False)
    if kind is list:
        return SequenceNode(_SEQ, [_node(dumper, item) for item in value], flow_style=False)
    if kind is bool:
        return ScalarNode(_BOOL, "true" if value else "false")
    if kind is int:
        return ScalarNode(_INT, str(value))
    if kind is float:
        return ScalarNode(_FLOAT, _float_text(value))
    if value is None:
        return ScalarNode(_NULL, "null")
    return dumper.represent_data(value)  # anything else, as PyYAML represents it


def dump_manifest(obj: dict[str, Any]) -> str:
    """One object as YAML text, byte for byte what `yaml.dump(obj, Dumper=ManifestDumper, sort_keys=False,
    default_flow_style=False, width=10_000)` writes."""
    stream = io.StringIO()
    dumper = ManifestDumper(stream, default_flow_style=False, width=10_000, sort_keys=False)
    try:
        dumper.open()
        dumper.serialize(_node(dumper, obj))
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()
