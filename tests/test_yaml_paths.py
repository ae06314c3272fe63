"""The fast YAML path (yaml-rs) reads every document exactly as PyYAML does, or is not taken."""

from __future__ import annotations

import math

import pytest
import yaml
from conftest import ROOT
from kubetrain.model.manifests import _differs_in_yaml_12, parse_documents

from training.config import StrictYamlLoader

TRICKY = ["a: yes", "a: On", "a: 0777", "a: 0o17", "a: 1:30", "a: 1e3", "a: 1.5e3", "a: 2001-12-14", "a: =",
          "a: &x [1]\nb: *x", "x: !!str 3", "<<: {a: 1}", "%YAML 1.1\n---\na: 1", "a: 1\n---\nb: 2", "args: [3e-4]",
          "a: 1.0e-05", "a: .inf", "a: ~", "a: 'yes'", "a: |\n  on\n", "k: v\nk: w", "a: 0x1F", "a: 1_000",
          "- n\n- y", "a: [1,", "a: 3.0e+05", "env: {NCCL_P2P_DISABLE: '0'}",
          "[on,off]", "{yes: 1}", "yes: 1", "a: !!binary aGk=", "pid=$!", "a: 2001-12-14t21:59:43.10-05:00",
          "a: ''", "a: ['', \"\"]"]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and (a == b if not isinstance(a, (dict, list)) else (
        len(a) == len(b) and all(same(x, y) for x, y in (zip(a, b) if isinstance(a, list) else
                                                          ((a[k], b.get(k)) for k in a)))))


@pytest.mark.parametrize("text", TRICKY)
def test_both_paths_agree_on_tricky_scalars(text):
    try:
        expected = list(yaml.load_all(text, Loader=StrictYamlLoader))
    except yaml.YAMLError:
        with pytest.raises(yaml.YAMLError):
            parse_documents(text)
        return
    assert same(parse_documents(text), [d for d in expected if d is not None])


def test_committed_dist_takes_the_fast_path_and_reads_the_same():
    files = sorted((ROOT / "dist").rglob("*.yaml"))
    fast = [f for f in files if not _differs_in_yaml_12(f.read_text())]
    assert len(fast) >= len(files) // 2, "most of kubetrain's own output should take the fast path"
    for file in files:
        assert same(parse_documents(file.read_text()), [yaml.load(file.read_text(), Loader=yaml.SafeLoader)])
