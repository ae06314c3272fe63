"""Manifests as plain data: one object and the file it comes from (`Manifest`), and reading manifest files
(`read_manifest`, `yaml_files`, `manifest_files`), with one line naming the file, the line and the fix for
anything that is not a readable object. Read by validate, plan, diff, cost and run-local alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
import yaml_rs

from training.config import StrictYamlLoader


@dataclass(frozen=True)
class Manifest:
    file: str  # where the object comes from (a file, or the path synth will write it to)
    body: Any
    folder: Path | None = None  # the file's folder on disk, to find its cluster's version

    @property
    def label(self) -> str:
        if not isinstance(self.body, dict):
            return "?"
        name = (self.body.get("metadata") or {}).get("name", "?")
        return f"{self.body.get('kind', '?')}/{name}"


# Two parsers. PyYAML (libyaml's C scanner) reads YAML 1.1, as kubectl's go-yaml does, but builds
# Python objects in Python: about 1 ms a manifest. yaml-rs (Rust) is ten times faster and reads YAML
# 1.2, which resolves some plain scalars differently (`yes`, `on`: booleans in 1.1, strings in 1.2;
# `0777`; `1:30`; `1e3`). A document takes the fast path only when no token of it could be one of
# those (nor a tag, a merge key, a directive or a second document); false alarms only cost speed.
# A test checks both paths read the same.
_YAML_11_WORDS = frozenset({"y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off",
                            "OFF", "=", "<<"})
_NUMBER_OR_TAG = re.compile(r"""(?mx) ^(?:
      ![^\n]*                                                          (?# a tag)
    | [-+]?0[0-9_]+ | [-+]?0[oO][0-7_]+                                 (?# octal, each its own way)
    | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?                 (?# sexagesimal)
    | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+ | [-+]?[0-9]*\.[0-9_]*[eE][0-9]+  (?# exponent without a dot or a sign)
    | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[^\n]*                             (?# timestamps)
    )$""")
_NUMBER_OR_TAG_START = tuple("!+-0123456789")
_FLOW_AS_SPACE = str.maketrans("[]{},", "     ")  # flow indicators end a token as whitespace does
_DOCUMENT_MARKERS = ("%", "---", "...")  # a directive, a second document or an explicit end


def _differs_in_yaml_12(text: str) -> bool:
    # str.split and set operations run in C; only the distinct tokens that start like a number or
    # a tag reach the (one) regex search.
    if text.startswith(_DOCUMENT_MARKERS) or any(f"\n{marker}" in text for marker in _DOCUMENT_MARKERS):
        return True
    tokens = {token.strip(":'\"") for token in set(text.translate(_FLOW_AS_SPACE).split())}
    if not tokens.isdisjoint(_YAML_11_WORDS):
        return True
    numbers = "\n".join(token for token in tokens if token.startswith(_NUMBER_OR_TAG_START))
    return _NUMBER_OR_TAG.search(numbers) is not None


def parse_documents(text: str) -> list[Any]:
    """The YAML documents of a manifest file, read as PyYAML reads them (YAMLError on bad YAML)."""
    if not _differs_in_yaml_12(text):
        try:
            document = yaml_rs.loads(text)  # a key twice in a mapping is an error, as in kubectl
            return [] if document is None else [document]
        except yaml_rs.YAMLDecodeError:
            pass  # PyYAML reports it, in the words users know
    return list(yaml.load_all(text, Loader=StrictYamlLoader))


_CONFLICT_MARKERS = ("<<<<<<<", "=======", ">>>>>>>", "|||||||")


def dist_fix(file: str) -> str:
    """dist/ is written by synth: a file there that cannot be read was edited by hand or left by a merge."""
    if "dist" not in Path(file).parts:  # a manifest of the user's own, given to validate
        return "fix the file at that line, or give validate only Kubernetes manifests"
    return (f"files in dist/ are written by `kubetrain synth`: undo the hand edit (`git checkout -- {file}`), or "
            "run `kubetrain synth` to write dist/ again")


class UnreadableManifest(ValueError):
    """A manifest file that holds no readable Kubernetes objects, as one line: the file, the line, what is wrong
    and how to fix it (`file`, `line`, `reason` and `fix` for callers that print their own layout)."""

    def __init__(self, file: str, line: int | None, reason: str, fix: str | None = None):
        self.file, self.line, self.reason, self.fix = file, line, reason, fix or dist_fix(file)
        super().__init__(f"{file}{f':{line}' if line else ''}: {reason}; fix: {fix}")


def read_manifest(file: str, data: bytes) -> list[dict[str, Any]]:
    """The objects of one manifest file; UnreadableManifest for text that is not UTF-8, a git conflict marker,
    YAML that does not parse, or a document that is not a mapping (an object)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableManifest(file, data[:exc.start].count(b"\n") + 1,
                                 f"byte {data[exc.start]:#04x} is not UTF-8 text (was it saved in another encoding?)",
                                 f"save the file as UTF-8, or {dist_fix(file)}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(_CONFLICT_MARKERS) and line[:7] in _CONFLICT_MARKERS and line[7:8] in ("", " "):
            raise UnreadableManifest(
                file, number, f"a git merge conflict marker ({line[:7]}) is left in the file",
                "never resolve conflicts in dist/ by hand: resolve them in the fleet's code, run `kubetrain synth` "
                "and commit the dist/ it writes (during a merge, take either side of dist/ and synth again)")
    try:
        documents = parse_documents(text)
    except yaml.YAMLError as exc:
        mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        if context is not None and getattr(exc, "context", None):
            problem += f" ({exc.context} at line {context.line + 1})"
        raise UnreadableManifest(file, (mark or context).line + 1 if mark or context else None,
                                 f"not valid YAML: {problem}") from None
    if all(isinstance(doc, dict) or doc is None for doc in documents):
        return [doc for doc in documents if doc is not None]  # an empty document is no object, as for kubectl
    # Only now find where each document starts (composing again is slow, and needed only for the message).
    starts = [node.start_mark.line + 1 for node in yaml.compose_all(text, Loader=StrictYamlLoader)]
    index = next(i for i, doc in enumerate(documents) if not isinstance(doc, dict) and doc is not None)
    what = {list: "a list", str: "a string", bool: "true or false"}.get(type(documents[index]), "a number")
    raise UnreadableManifest(file, starts[index] if index < len(starts) else None,
                             f"document {index + 1} is {what}, not a Kubernetes object (a mapping with apiVersion, "
                             "kind and metadata)")


def manifest_files(path: Path) -> list[tuple[Path, Path]]:
    """(file, its resolved folder) for a file, or for every .yaml/.yml file under a folder in path order.
    os.walk, and one resolve per folder: at fleet scale, per-file pathlib calls cost more than parsing."""
    if not path.is_dir():
        return [(path, path.parent.resolve())]
    found = []
    for folder, _, names in os.walk(path):
        resolved = Path(folder).resolve()
        found += [(Path(folder, name), resolved) for name in names
                  if name.endswith((".yaml", ".yml")) and os.path.isfile(os.path.join(folder, name))]
    return sorted(found, key=lambda item: item[0].parts)


def yaml_files(folder: Path) -> dict[str, bytes]:
    """Every .yaml/.yml file under `folder` by its path relative to it, as bytes ({} when there is no folder)."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.suffix in (".yaml", ".yml") and p.is_file()}
