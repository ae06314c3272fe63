"""Manifests are written by kubetrain's own node builder on libyaml's emitter: the same bytes PyYAML writes."""

from __future__ import annotations

import random

import pytest
import yaml
from conftest import ROOT
from kubetrain.output.emit import ManifestDumper, dump_manifest


def pyyaml(obj: object) -> str:
    return yaml.dump(obj, Dumper=ManifestDumper, sort_keys=False, default_flow_style=False, width=10_000)


def test_every_committed_object_is_written_as_pyyaml_writes_it():
    files = sorted((ROOT / "dist").rglob("*.yaml"))
    assert files
    for file in files:
        obj = yaml.safe_load(file.read_text())
        assert dump_manifest(obj) == pyyaml(obj) == file.read_text(), file


SCALARS = ["", " ", "yes", "on", "null", "~", "true", "1", "0777", "1e3", "1.0", ".inf", "-", "- a", "a: b", "a #b",
           "#x", "*x", "&x", "!x", "%x", "@x", "`x", "'", '"', "x\n", "a\nb", "\na", " a\nb", "a\n\n\nb\n\n", "a \nb",
           "tab\there", "caf\u00e9", "\u2028", "\ufeff", "\x85", "x" * 200, "k:", "{a}", "[a]", "a,b", "?", ":", "|",
           ">", "=", "<<"]
NUMBERS = [0, -1, 10**30, 1.5, -0.0, 1e17, 3e-05, float("inf"), float("-inf"), float("nan"), True, False, None]


@pytest.mark.parametrize("scalar", SCALARS)
def test_tricky_strings_as_keys_values_and_items(scalar):
    obj = {"k": scalar, scalar: [scalar, {"x": scalar, "y": [scalar]}, [scalar]], "n": NUMBERS, "e": {}, "l": []}
    assert dump_manifest(obj) == pyyaml(obj)


def test_random_strings():
    rng = random.Random(7)
    alphabet = list("ab yesnoON01:#'\"-?{}[],&*!|>%@`\\\t\n.e+~\u00e9\u2028\x85")
    for _ in range(2_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        obj = {"metadata": {"name": text, "labels": {text: text}}, "spec": [{"args": [text, text + "\n"]}]}
        assert dump_manifest(obj) == pyyaml(obj), repr(text)


def test_random_documents():
    """Nested mappings and sequences of every shape, with scalars from the tricky ones: the block writer's
    indentation, items, empty collections and open-ended literal blocks against PyYAML's."""
    rng = random.Random(11)
    leaves = [*SCALARS, *NUMBERS, "a\n", "a\n\n", " lead", "x" * 5_000, "k" * 130, {}, []]

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.7:
            return {str(rng.choice(leaves)) if rng.random() < 0.8 else rng.choice(["a", "b", "a\nb"]): value(depth + 1)
                    for _ in range(rng.randint(1, 4))}
        return [value(depth + 1) for _ in range(rng.randint(1, 4))]

    for _ in range(1_500):
        obj = {"apiVersion": "v1", "kind": "X", **{f"f{i}": value(0) for i in range(rng.randint(1, 3))}}
        assert dump_manifest(obj) == pyyaml(obj), obj


def test_what_the_block_writer_leaves_to_pyyaml():
    """A key that is not a string, a key too long to be simple, a string long enough to fold: PyYAML writes the
    object whole, so the bytes are still its own."""
    for obj in ({"a": {1: "x"}}, {"k" * 200: 1}, {"a": ["word " * 3_000]}, {"a": [("t", "u")]}):
        assert dump_manifest(obj) == pyyaml(obj)
