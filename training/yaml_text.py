"""YAML text byte for byte as `yaml.dump(..., sort_keys=False, default_flow_style=False)` writes it, faster.

PyYAML represents data as a node tree in Python and then emits it; for documents of mappings, sequences and
plain scalars most of that work is the same every time. `BlockWriter` writes the block structure itself
(indentation, `- ` items, `key:` lines, `{}` and `[]`) and takes each scalar's text from PyYAML: a string
that is certainly plain (a conservative pattern, and the Dumper's resolver reads it back as a string) is
written as is; any other string is written once by PyYAML in the position it takes (a mapping key, a value,
an item) and the text is cached, further lines re-indented where it is written. Whatever it cannot write
exactly goes to PyYAML whole: a key that is not a string or not a simple key, a line the width would fold,
an object met twice where the Dumper would write an alias, a type other than dict, list, str, int, float,
bool and None. Tests compare both on every manifest of the fleet, on tricky scalars and on random documents.

kubetrain's manifests (kubetrain.output.emit) and the run config (`RunConfig.to_yaml`) are written with it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.nodes import ScalarNode

_STR = "tag:yaml.org,2002:str"
_DOCUMENT_END = "..."
_SIMPLE_KEY = 128  # PyYAML writes a longer key (or one with a line break) as a complex key ("? ")
# Certainly plain in block context, if the resolver reads it as a string: no spaces, no indicator first, no
# ': ' or ' #' inside, nothing but printable ASCII, not ending in ':'.
_PLAIN = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./:=+@-]*(?<!:)\Z")
_CACHED = 100_000  # a bound on each cache, for long-lived processes
_NO_LINES: list[str] = []


class _Fallback(Exception):
    """The document holds something the block writer does not write exactly."""


def float_text(value: float) -> str:
    """SafeRepresenter.represent_float's text."""
    if value != value:  # noqa: PLR0124 - NaN is the one float unequal to itself
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text


class BlockWriter:
    """Block-style YAML as `yaml.dump(obj, Dumper=dumper, sort_keys=False, default_flow_style=False,
    width=width)` writes it; `fallback(obj)` must write exactly that (it defaults to that very call)."""

    def __init__(self, dumper: type[yaml.SafeDumper], width: int = 80,
                 fallback: Callable[[Any], str] | None = None):
        self.dumper, self.width = dumper, width
        self.fallback = fallback or self._pyyaml
        self._resolver = dumper(io.StringIO())
        self._aliases = not dumper.ignore_aliases(self._resolver, {})  # containers met twice become aliases
        self._values: dict[str, tuple[str, list[str], bool | None]] = {}
        self._keys: dict[str, str] = {}

    def dump(self, obj: Any) -> str:
        if type(obj) is dict and obj:
            document = _Document(self)
            try:
                document.write(obj, 0)
                return document.text()
            except _Fallback:
                pass
        return self.fallback(obj)

    def _pyyaml(self, obj: Any) -> str:
        return yaml.dump(obj, Dumper=self.dumper, sort_keys=False, default_flow_style=False, width=self.width)

    def _plain(self, value: str) -> bool:
        return _PLAIN.match(value) is not None and self._resolver.resolve(ScalarNode, value, (True, False)) == _STR

    def value(self, value: str) -> tuple[str, list[str], bool | None]:
        """A string as a mapping value or a sequence item: its text on the line, its further lines (a literal
        block's, indented 2), and for a literal block whether it leaves the document open-ended (None for
        other scalars): libyaml ends a document with "..." when its last block scalar keeps its trailing line
        breaks ("|+"), whatever follows it."""
        found = self._values.get(value)
        if found is None:
            if self._plain(value):
                found = (value, [], None)
            elif len(value) > self.width // 2:  # PyYAML could fold it here or where it is written
                raise _Fallback
            else:
                head, *more = self._pyyaml({"k": value}).split("\n")[:-1]
                open_ended = more[-1:] == [_DOCUMENT_END]
                found = (head[3:], more[:-1] if open_ended else more, open_ended if head[3:4] in "|>" else None)
            if len(self._values) > _CACHED:
                self._values.clear()
            self._values[value] = found
        return found

    def key(self, key: Any) -> str:
        if type(key) is not str:
            raise _Fallback
        found = self._keys.get(key)
        if found is None:
            if len(key) >= _SIMPLE_KEY:
                raise _Fallback
            if self._plain(key):
                found = key
            else:
                written = self._pyyaml({key: 1})
                if not written.endswith(": 1\n") or written.count("\n") != 1:  # written as a complex key ("? ...")
                    raise _Fallback
                found = written[:-4]
            if len(self._keys) > _CACHED:
                self._keys.clear()
            self._keys[key] = found
        return found


class _Document:
    """The lines of one document; `open_ended` when its last block scalar leaves it open."""

    def __init__(self, writer: BlockWriter):
        self.writer = writer
        self.lines: list[str] = []
        self.open_ended = False
        self.seen: set[int] | None = set() if writer._aliases else None

    def text(self) -> str:
        return "\n".join([*self.lines, _DOCUMENT_END] if self.open_ended else self.lines) + "\n"

    def scalar(self, head: str, value: Any, pad: str) -> None:
        kind = type(value)
        if kind is str:
            text, more, open_ended = self.writer._values.get(value) or self.writer.value(value)
            if open_ended is not None:
                self.open_ended = open_ended
        else:
            more = _NO_LINES
            if kind is bool:
                text = "true" if value else "false"
            elif kind is int:
                text = str(value)
            elif kind is float:
                text = float_text(value)
            elif value is None:
                text = "null"
            else:
                raise _Fallback
        line = f"{head} {text}"
        if len(line) > self.writer.width and (" " in text or text[:1] in "'\""):
            raise _Fallback  # PyYAML would fold it
        self.lines.append(line)
        if more:
            self.lines.extend(f"{pad}{extra}" if extra else extra for extra in more)

    def visit(self, value: Any) -> None:
        if self.seen is not None:
            if id(value) in self.seen:
                raise _Fallback  # the Dumper writes an anchor and an alias
            self.seen.add(id(value))

    def write(self, value: Any, indent: int) -> None:
        """A non-empty mapping or sequence whose keys or dashes start at column `indent`."""
        self.visit(value)
        pad, lines, keys = " " * indent, self.lines, self.writer._keys
        if type(value) is dict:
            for key, item in value.items():
                head = f"{pad}{keys.get(key) or self.writer.key(key)}:"
                kind = type(item)
                if kind is dict or kind is list:
                    if item:
                        lines.append(head)
                        self.write(item, indent + 2 if kind is dict else indent)  # sequences in a mapping: indentless
                    else:
                        self.visit(item)
                        lines.append(f"{head} {{}}" if kind is dict else f"{head} []")
                else:
                    self.scalar(head, item, pad)
            return
        dash = f"{pad}-"
        for item in value:
            kind = type(item)
            if kind is dict or kind is list:
                if item:
                    start = len(lines)
                    self.write(item, indent + 2)
                    lines[start] = f"{dash} {lines[start][indent + 2:]}"
                else:
                    self.visit(item)
                    lines.append(f"{dash} {{}}" if kind is dict else f"{dash} []")
            else:
                self.scalar(dash, item, pad)
