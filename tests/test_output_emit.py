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
