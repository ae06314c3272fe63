"""Manifests as YAML text: block style, no aliases, multi-line strings as literal blocks.

The bytes are PyYAML's (`yaml.dump(obj, Dumper=ManifestDumper, sort_keys=False, default_flow_style=False,
width=10_000)`, libyaml's emitter); a test compares both on every object of the fleet, on tricky scalars
and on random documents. training.yaml_text's block writer writes them; what it leaves to PyYAML goes
through libyaml's emitter with the node tree built here (`_node`: the same nodes PyYAML's SafeRepresenter
would build, without its cost), and the resolver's verdict on a scalar (which decides whether it needs
quotes) is cached, since manifests repeat the same keys and values many times.
"""

from __future__ import annotations

import io
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from training.yaml_text import BlockWriter, float_text

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
        return ScalarNode(_FLOAT, float_text(value))
    if value is None:
        return ScalarNode(_NULL, "null")
    return dumper.represent_data(value)  # anything else, as PyYAML represents it


def dump_manifest(obj: dict[str, Any]) -> str:
    """One object as YAML text, byte for byte what `yaml.dump(obj, Dumper=ManifestDumper, sort_keys=False,
    default_flow_style=False, width=10_000)` writes."""
    return _WRITER.dump(obj)


def _emitted(obj: Any) -> str:
    """PyYAML's emitter over the node tree built here."""
    stream = io.StringIO()
    dumper = ManifestDumper(stream, default_flow_style=False, width=10_000, sort_keys=False)
    try:
        dumper.open()
        dumper.serialize(_node(dumper, obj))
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()


_WRITER = BlockWriter(ManifestDumper, width=10_000, fallback=_emitted)
