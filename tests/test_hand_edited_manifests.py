"""`kubetrain validate` and `kubetrain cost` read what synth checks, in manifests edited by hand after synth: the
run config inside a job's ConfigMap (read as the pod reads it), a PrometheusRule's expressions and rule shape (as
Prometheus loads its rule file), a ClusterQueue's and a Cohort's resource groups (as Kueue's webhook admits them).
Each edit is made to a file synth wrote, and the real command runs on it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, dist_file, kubetrain, read_tree

from kubetrain.kinds.kueue import resource_group_problems
from kubetrain.kinds.monitoring import rule_problems

TINY_GPT = dist_file("dev", "ConfigMap", "tiny-gpt", "-config")  # run.yaml: dim 64, n_heads 4
RULES = ROOT / "dist/prod/ml-prod/PrometheusRule.training-alerts.yaml"
RESEARCH = ROOT / "dist/prod/_cluster/ClusterQueue.research.yaml"
SECOND_GROUP = ("  cohortName: org\n", "  - coveredResources: [cpu]\n    flavors:\n    - name: host\n      resources:\n"
                "      - {name: cpu, nominalQuota: '8'}\n  cohortName: org\n")

# (file, text replaced, its replacement, what the finding says, its code)
EDITS = [
    (TINY_GPT, "      dim: 64\n", "      dimm: 64\n",
     "data[run.yaml].model.dimm: unknown field; fix: did you mean 'dim'? rename it", "KT001"),
    (TINY_GPT, "      n_heads: 4\n", "      n_heads: 5\n", "data[run.yaml].model", "KT202"),
    (TINY_GPT, "    max_steps: 100\n", "    max_steps: [100\n",
     "data[run.yaml]: cannot read the config: ", "KT004"),
    (TINY_GPT, "    max_steps: 100\n", "    max_steps: -1\n", "data[run.yaml].max_steps: ", "KT003"),
    (RULES, 'kubetrain_dev_job!=""} == 0\n', 'kubetrain_dev_job!=""} == (0\n',
     "spec.groups[0].rules[1].expr: not PromQL: ", "KT475"),
    (RULES, "    - alert: TrainingEndpointDown\n", "    - alert: TrainingEndpointDown\n      record: job:starts\n",
     "spec.groups[0].rules[1].record: the rule is both alert 'TrainingEndpointDown' and record 'job:starts'; "
     "fix: split it into an alerting rule and a recording rule", "KT478"),
    (RULES, "    - alert: TrainingRunRestarting\n", "    - record: job:starts\n",
     "spec.groups[0].rules[2].annotations: recording rule 'job:starts' has annotations", "KT478"),
    (RESEARCH, *SECOND_GROUP, "spec.resourceGroups[1].coveredResources[0]: cpu is covered by resource groups 0 "
     "and 1: Kueue takes each resource in one group; fix: cover cpu in one group", "KT003"),
    (RESEARCH, "nvidia.com/gpu\n", "nvidia.com/gpus\n", "spec.resourceGroups[0].coveredResources[2]: "
     "'nvidia.com/gpus' is no resource a node offers; fix: did you mean 'nvidia.com/gpu'?", "KT003"),
    (RESEARCH, "        nominalQuota: '16'\n", "        nominalQuota: '16'\n        lendingLimit: '32'\n",
     "spec.resourceGroups[0].flavors[0].resources[2].lendingLimit: lending limit 32 is above the nominal quota 16",
     "KT451"),
]


@pytest.fixture()
def dist(tmp_path) -> Path:
    shutil.copytree(ROOT / "dist", tmp_path / "dist")
    return tmp_path / "dist"


def _edit(dist: Path, file: Path, old: str, new: str) -> Path:
    path = dist / file.relative_to(ROOT / "dist")
    text = path.read_text()
    assert old in text, f"{file.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.processes
@pytest.mark.parametrize(("file", "old", "new", "expected", "code"), EDITS,
                         ids=[f"{f.name.split('.')[0]}-{c}-{i}" for i, (f, *_, c) in enumerate(EDITS)])
def test_validate_refuses_a_hand_edit_synth_would_refuse(dist, file, old, new, expected, code):
    path = _edit(dist, file, old, new)
    result = kubetrain("validate", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stdout + result.stderr
    [line] = [line for line in result.stdout.splitlines() if f"[{code}]" in line]
    assert expected in line and "fix: " in line, line


@pytest.mark.processes
def test_the_committed_manifests_pass_these_checks():
    result = kubetrain("validate", str(TINY_GPT), str(RULES), str(RESEARCH))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.processes
@pytest.mark.parametrize(("old", "new", "expected"), [
    ("      n_heads: 4\n", "      n_heads: 5\n", "ConfigMap tiny-gpt-"),
    ("      dim: 64\n", "      dimm: 64\n",
     "data[run.yaml].model.dimm: unknown field [KT001]; fix: did you mean 'dim'?"),
    ("    max_steps: 100\n", "    max_steps: [100\n", "data[run.yaml]: cannot read the config: "),
    ("  run.yaml: |\n", "  notes.yaml: |\n", "the pods read a run config (KUBETRAIN_RUN_CONFIG), and no ConfigMap they "
                                           "mount (tiny-gpt-"),
])
def test_cost_refuses_a_run_config_it_cannot_read(dist, old, new, expected):
    _edit(dist, TINY_GPT, old, new)
    before = read_tree(dist)
    result = kubetrain("cost", "--dist", str(dist))
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: dev/ml-dev: ") and expected in line and "fix: " in line, line
    assert read_tree(dist) == before


def _rule_group(*rules: dict) -> dict:
    return {"kind": "PrometheusRule", "spec": {"groups": [{"name": "g", "rules": list(rules)}]}}


@pytest.mark.parametrize(("obj", "expected"), [
    (_rule_group({"alert": "A", "expr": "up == 0"}), []),
    (_rule_group({"record": "job:up:sum", "expr": "sum by (job) (up)", "labels": {"team": "ml"}}), []),
    (_rule_group({"expr": "up"}), [("spec.groups[0].rules[0]", "KT478")]),
    (_rule_group({"alert": "A", "expr": ""}), [("spec.groups[0].rules[0].expr", "KT475")]),
    (_rule_group({"record": "r", "expr": "up", "for": "5m", "keep_firing_for": "1m"}),
     [("spec.groups[0].rules[0].for", "KT478"), ("spec.groups[0].rules[0].keep_firing_for", "KT478")]),
    (_rule_group({"alert": "A", "expr": "rate(up[5m]"}), [("spec.groups[0].rules[0].expr", "KT475")]),
    ({"spec": {"groups": [{"name": "g", "rules": []}, {"name": "g", "rules": []}]}},
     [("spec.groups[1].name", "KT478")]),
])
def test_a_rule_file_prometheus_refuses(obj, expected):
    assert [(path, code) for path, _, code in rule_problems(obj, lambda kind, name: None)] == expected


def _queue(kind: str, groups: list, **spec) -> dict:
    return {"kind": kind, "spec": {"resourceGroups": groups, **spec}}


def _group(resources: list[str], *flavors: tuple[str, list[dict]]) -> dict:
    return {"coveredResources": resources, "flavors": [{"name": n, "resources": r} for n, r in flavors]}


GPU = {"name": "nvidia.com/gpu", "nominalQuota": "8"}
CPU = {"name": "cpu", "nominalQuota": "8"}


@pytest.mark.parametrize(("obj", "expected"), [
    (_queue("ClusterQueue", [_group(["nvidia.com/gpu"], ("p5", [GPU])), _group(["cpu"], ("host", [CPU]))]), []),
    (_queue("ClusterQueue", [_group(["nvidia.com/gpu"], ("p5", [GPU])), _group(["nvidia.com/gpu"], ("p4", [GPU]))]),
     [("spec.resourceGroups[1].coveredResources[0]", "KT003")]),
    (_queue("ClusterQueue", [_group(["nvidia.com/gpu"], ("p5", [GPU])), _group(["cpu"], ("p5", [CPU]))]),
     [("spec.resourceGroups[1].flavors[0].name", "KT003")]),
    (_queue("ClusterQueue", [_group(["cpu", "nvidia.com/gpu"], ("p5", [GPU, CPU]))]),
     [("spec.resourceGroups[0].flavors[0].resources[0].name", "KT003"),
      ("spec.resourceGroups[0].flavors[0].resources[1].name", "KT003")]),
    (_queue("ClusterQueue", [_group(["gpu"], ("p5", [{"name": "gpu", "nominalQuota": "8"}]))]),
     [("spec.resourceGroups[0].coveredResources[0]", "KT003")]),
    (_queue("ClusterQueue", [_group(["cpu"], ("p5", [{**CPU, "lendingLimit": "4"}]))]),
     [("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "KT451")]),
    (_queue("ClusterQueue", [_group(["cpu"], ("p5", [{**CPU, "lendingLimit": "4"}]))], cohortName="org"), []),
    (_queue("Cohort", [_group(["cpu"], ("p5", [{**CPU, "borrowingLimit": "4"}]))]),
     [("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "KT451")]),
    (_queue("Cohort", [_group(["cpu"], ("p5", [{**CPU, "lendingLimit": "16"}]))], parentName="root"), []),
])
def test_resource_groups_kueue_refuses(obj, expected):
    assert [(path, code) for path, _, code in resource_group_problems(obj, lambda kind, name: None)] == expected


def test_synth_refuses_the_same_edits_in_raw_objects_of_the_fleet(tmp_path):
    """The checks are each kind's, so synth's validation step runs them on every object it writes: a raw object
    a fleet adds (or a patch makes) is held to them as the constructs' own are."""
    from kubetrain import App, Cluster
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    for i, (file, old, new, _, _) in enumerate(EDITS):
        obj = yaml.safe_load(file.read_text().replace(old, new))
        obj["metadata"]["name"] = f"{obj['metadata']['name'][:40]}-{i}"
        if obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = "ml"
        cluster.add_object(obj)
    with pytest.raises(ConfigError) as raised:
        synth(app, tmp_path / "dist")
    found = {(p.code, p.message.split(": ")[1]) for p in raised.value.problems}
    for i, (file, _, _, _, code) in enumerate(EDITS):
        assert any(c == code and name.endswith(f"-{i}") for c, name in found), (file.name, code, found)
    assert not (tmp_path / "dist").exists()
