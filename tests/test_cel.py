"""CEL validation rules (x-kubernetes-validations): the CRDs' own rules, evaluated as the API server does on create."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, dist_file
from kubetrain.model.manifests import Manifest
from kubetrain.pipeline import fleet_errors
from kubetrain.validation.cel_rules import RulePlan, uses_old_self
from kubetrain.validation.schemas import PROVENANCE, SHIPPED
from kubetrain.validation.validate import Schemas, validate_objects

FIXTURE_CRDS = ROOT / "tests" / "fixtures" / "crds"


def shipped(kind: str) -> dict[str, Any]:
    """A committed object of the example fleet (prod's platform objects are cluster-scoped)."""
    folder = ROOT / "dist" / "prod" / "_cluster"
    named = {"EC2NodeClass": "cpu", "ClusterQueue": "training"}
    (path,) = [folder / f"{kind}.{named[kind]}.yaml"] if kind in named else folder.glob(f"{kind}.*.yaml")
    return yaml.safe_load(path.read_text())


def findings(obj: dict[str, Any], crds: tuple[Path, ...] = ()) -> list[tuple[str, str, str]]:
    return [(f.path, f.message, f.code) for f in validate_objects([Manifest("x.yaml", obj)], Schemas(crds), "1.33")]


def rule_failures(schema: dict[str, Any], obj: Any) -> list[tuple[str, str]]:
    plan = RulePlan.build(schema)
    return plan.failures(obj) if plan else []


# -- every shipped rule compiles ---------------------------------------------------------------------------

def _rules_in(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [rule for item in node for rule in _rules_in(item)]
    if not isinstance(node, dict):
        return []
    own = [r for r in node.get("x-kubernetes-validations") or []]
    return own + [rule for key, value in node.items() if key != "x-kubernetes-validations" for rule in _rules_in(value)]


def test_every_rule_of_every_shipped_schema_compiles():
    provenance = json.loads((SHIPPED / PROVENANCE).read_text())
    total, compiled = 0, 0
    for name, entry in provenance.items():
        schema = json.loads((SHIPPED / name).read_text())
        rules = _rules_in(schema)
        assert entry["rules"] == len(rules), f"{name}: PROVENANCE.json counts {entry['rules']} rules"
        total += len(rules)
        plan = RulePlan.build(schema)
        evaluated = [rule for _, rule in plan.rules()] if plan else []
        assert [r.text for r in evaluated if r.program is None] == [], f"{name}: rules the runtime cannot compile"
        assert len(evaluated) == len([r for r in rules if not uses_old_self(r["rule"]) or r.get("optionalOldSelf")])
        compiled += len(evaluated)
    assert total >= 120 and compiled >= 90  # Karpenter, Kueue, Trainer, PyTorchJob: 123 rules, 91 on create


def test_a_rule_the_runtime_cannot_compile_is_a_finding_not_a_crash():
    schema = {"type": "object", "properties": {"spec": {"type": "string", "x-kubernetes-validations": [
        {"rule": "format.dns1123Label().validate(self).hasValue() == false"}]}}}
    (failure,) = rule_failures(schema, {"spec": "x"})
    assert failure[0] == "spec" and failure[1].startswith("rule compile error: ")


# -- the shipped schemas' rules on real objects ------------------------------------------------------------

def test_every_object_of_the_example_fleet_passes_every_rule():
    from kubetrain.pipeline import render_objects

    from apps import build

    objects = render_objects(build())
    manifests = [Manifest(str(path), obj, Path("/", *path.parts[:-1])) for path, obj in objects.items()]
    assert validate_objects(manifests, Schemas()) == []
    kinds = {obj["kind"] for obj in objects.values()}
    assert {"EC2NodeClass", "NodePool", "Topology", "ClusterQueue", "ResourceFlavor", "TrainJob"} <= kinds


def test_ec2nodeclass_alias_needs_family_at_version():
    node_class = shipped("EC2NodeClass")
    node_class["spec"]["amiSelectorTerms"] = [{"alias": "al2023"}]
    message = ("'alias' is improperly formatted, must match the format 'family@version' "
               "(rule: self.matches('^[a-zA-Z0-9]+@.+$'))")
    assert ("spec.amiSelectorTerms[0].alias", message, "KT604") in findings(node_class)
    node_class["spec"]["amiSelectorTerms"] = [{"alias": "ubuntu@latest"}]
    assert [f[0] for f in findings(node_class)] == ["spec.amiSelectorTerms[0].alias"]


def test_ec2nodeclass_role_must_be_set_not_empty_and_not_beside_an_instance_profile():
    node_class = shipped("EC2NodeClass")
    node_class["spec"]["role"] = ""
    assert [(f[0], f[1].split(" (rule")[0]) for f in findings(node_class)] == [("spec.role", "role cannot be empty")]
    node_class["spec"]["role"] = "KarpenterNodeRole"
    node_class["spec"]["instanceProfile"] = "profile"
    (found,) = findings(node_class)
    assert found[0] == "spec" and "must specify exactly one of ['role', 'instanceProfile']" in found[1]
    del node_class["spec"]["role"], node_class["spec"]["instanceProfile"]
    assert any(f[0] == "spec" and "exactly one of ['role', 'instanceProfile']" in f[1] for f in findings(node_class))


def test_topology_levels_must_be_unique_with_the_hostname_last():
    topology = shipped("Topology")
    levels = topology["spec"]["levels"]
    topology["spec"]["levels"] = [levels[0], *levels]
    assert [(f[0], f[1].split(" (rule")[0]) for f in findings(topology)] == [("spec.levels", "must be unique")]
    topology["spec"]["levels"] = [levels[-1], *levels[:-1]]
    (found,) = findings(topology)
    assert found[0] == "spec.levels" and "kubernetes.io/hostname" in found[1] and found[2] == "KT604"


def test_trainjob_name_over_63_characters_fails_its_rule():
    job = yaml.safe_load(dist_file("dev", "TrainJob", "tiny-gpt").read_text())
    job["metadata"]["name"] = "t" * 64
    messages = [f[1] for f in findings(job) if f[2] == "KT604"]
    assert any("63" in m for m in messages), messages


def test_clusterqueue_flavors_must_cover_exactly_the_covered_resources():
    queue = shipped("ClusterQueue")
    queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"].pop()
    (found,) = findings(queue)
    assert found[0] == "spec.resourceGroups[0]" and found[2] == "KT604"
    assert "flavor" in found[1] and "coveredResources" in found[1]


def test_rules_are_not_evaluated_on_an_object_the_schema_refuses():
    topology = shipped("Topology")
    topology["spec"]["levels"] = [{"nodeLabel": "a"}, {"nodeLabel": "a"}, {"nodeLabl": "b"}]
    found = findings(topology)
    assert [f[2] for f in found] == ["KT602"] * (len(found) - 1) + ["KT606"]  # no "must be unique" (KT604)
    assert "some validation rules were not checked because the object was invalid" in found[-1][1]


# -- the same rules at the constructs' inputs, with the user's field path ----------------------------------

def _pool_problems(**changes: Any) -> list[str]:
    from kubetrain import App, Cluster, CpuNodePool

    cluster = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    props = {"instance_types": ["m5.4xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-0abc1234"],
             "security_group_ids": ["sg-0abc1234"], "role": "KarpenterNodeRole-prod", "max_nodes": 2, **changes}
    CpuNodePool(cluster, "cpu", props)  # a pool whose props fail is recorded and emits nothing
    return [finding.format() for finding in fleet_errors(cluster)]


@pytest.mark.parametrize(("changes", "expected"), [
    ({"role": ""}, "prod/nodepool/cpu: role: role cannot be empty"),
    ({"ami_alias": "al2023"}, "prod/nodepool/cpu: ami_alias: 'al2023' is not in the format 'family@version'"),
    ({"ami_alias": "ubuntu@latest"}, "prod/nodepool/cpu: ami_alias: AMI family 'ubuntu' has no Karpenter alias"),
    ({"ami_alias": "windows2022@v1"}, ("prod/nodepool/cpu: ami_alias: 'windows2022@v1': Windows aliases may only "
                                       "specify version 'latest'")),
])
def test_node_pool_inputs_refuse_what_the_ec2nodeclass_rules_refuse(changes, expected):
    (line,) = _pool_problems(**changes)
    assert line.startswith(expected) and "[KT003] fix: " in line
    assert _pool_problems(ami_alias="bottlerocket@v1.40.0") == []


@pytest.mark.parametrize(("levels", "expected"), [
    (["a", "b", "a"], "prod/topology/t: levels.2: 'a' is already level 0: Kueue requires unique levels"),
    (["kubernetes.io/hostname", "a"], "prod/topology/t: levels.0: kubernetes.io/hostname can only be the lowest "
                                      "(last) level"),
])
def test_topology_levels_are_refused_at_the_input(levels, expected):
    from kubetrain import App, Cluster, Topology

    cluster = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    assert Topology(cluster, "t", levels=levels).rejected
    (line,) = [finding.format() for finding in fleet_errors(cluster)]
    assert line.startswith(expected) and "[KT003]" in line


# -- create semantics --------------------------------------------------------------------------------------

def test_transition_rules_are_skipped_on_create_unless_old_self_is_optional():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "integer", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
        "b": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "oldSelf.hasValue() && self > oldSelf.value()", "optionalOldSelf": True, "message": "grows"},
            {"rule": "!oldSelf.hasValue() || self > oldSelf.value()", "optionalOldSelf": True}]},
        "c": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'oldSelf'"}]}}}}}
    failures = rule_failures(schema, {"spec": {"a": 1, "b": 2, "c": "oldSelf"}})
    assert failures == [("spec.b", "grows (rule: oldSelf.hasValue() && self > oldSelf.value())"),
                        ("spec.c", "failed rule: self != 'oldSelf'")]
    # PyTorchJob's only rule is a transition rule: a committed job has none to fail.
    job = yaml.safe_load(dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").read_text())
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "other"}
    assert findings(job) == []


def test_defaults_are_applied_before_the_rules_run():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "default": {},
        "x-kubernetes-validations": [{"rule": "self.replicas <= self.maxReplicas", "message": "replicas above max"}],
        "properties": {"replicas": {"type": "integer", "default": 3}, "maxReplicas": {"type": "integer"},
                       "mode": {"type": "string", "default": "fast",
                                "x-kubernetes-validations": [{"rule": "self == 'slow'"}]}}}}}
    assert rule_failures(schema, {"spec": {"maxReplicas": 4}}) == [("spec.mode", "failed rule: self == 'slow'")]
    assert ("spec", "replicas above max (rule: self.replicas <= self.maxReplicas)") in rule_failures(
        schema, {"spec": {"maxReplicas": 2, "mode": "slow"}})
    # spec is absent: its default {} is what the rules see, and `self.maxReplicas` has no value.
    (failure, _) = rule_failures(schema, {})
    assert failure[0] == "spec" and "evaluating rule: replicas above max" in failure[1]


def test_message_expression_field_path_and_reason():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"},
                                         "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' is above max'",
             "fieldPath": ".min", "reason": "FieldValueForbidden"},
            {"rule": "self.min > 0", "messageExpression": "''", "message": "min must be positive",
             "fieldPath": ".labels['a.b']"}]}}}
    assert rule_failures(schema, {"spec": {"min": 0, "max": -1, "labels": {}}}) == [
        ("spec.min", "forbidden: min 0 is above max (rule: self.min <= self.max)"),
        ("spec.labels[a.b]", "min must be positive (rule: self.min > 0)")]


def test_a_rule_that_errors_reports_the_error_as_the_api_server_does():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "name": {"type": "string"}, "size": {"x-kubernetes-int-or-string": True}},
        "x-kubernetes-validations": [{"rule": "self.name.startsWith('a')"}, {"rule": "self.size + 1 > 2"}]}}}
    missing, overload = rule_failures(schema, {"spec": {"size": "big"}})
    assert missing[0] == "spec" and "evaluating rule: self.name.startsWith('a')" in missing[1]
    assert "call arguments did not match a supported operator, function or macro signature for rule: " \
           "self.size + 1 > 2" in overload[1]


def test_self_is_typed_by_the_schema():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self + 0.5 > 1.0"}]},
        "when": {"type": "string", "format": "date-time",
                 "x-kubernetes-validations": [{"rule": "self > timestamp('2020-01-01T00:00:00Z')"}]},
        "wait": {"type": "string", "format": "duration",
                 "x-kubernetes-validations": [{"rule": "self < duration('1h')"}]},
        "port": {"x-kubernetes-int-or-string": True,
                 "x-kubernetes-validations": [{"rule": "type(self) == string || self > 1024"}]},
        "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.lowerAscii() == self"}]}},
        "metadata": {"type": "object", "properties": {"namespace": {"type": "string"}, "my-key": {"type": "string"}},
                     "x-kubernetes-validations": [{"rule": "self.namespace == self.__namespace__ && "
                                                            "self.my__dash__key == 'v'"}]}}}}}
    good = {"spec": {"ratio": 1, "when": "2024-05-01T10:00:00Z", "wait": "90s", "port": "http", "tags": ["a"],
                     "metadata": {"namespace": "ns", "my-key": "v"}}}
    assert rule_failures(schema, good) == []
    bad = {"spec": {"ratio": 0, "when": "2019-05-01T10:00:00Z", "wait": "2h30m", "port": 80, "tags": ["a", "B"],
                    "metadata": {"namespace": "ns", "my-key": "w"}}}
    assert [path for path, _ in rule_failures(schema, bad)] == [
        "spec.ratio", "spec.when", "spec.wait", "spec.port", "spec.tags[1]", "spec.metadata"]


def test_a_resource_root_sees_only_the_name_of_its_metadata():
    schema = {"type": "object", "x-kubernetes-validations": [
        {"rule": "!has(self.metadata.namespace) && self.kind == 'Widget' && self.metadata.name == 'w'"}],
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}}
    assert rule_failures(schema, {"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "n"}}) == []


# -- Kubernetes' CEL libraries -----------------------------------------------------------------------------

LIBRARY = {
    "[1, 2, 3].isSorted()": True, "[2.0, 1.0].isSorted()": False, "[1, 3].sum()": 4, "[1.0, 3.0].sum()": 4.0,
    "[].sum()": 0, "[1, 3].min()": 1, "[1, 3].max()": 3, "[1, 2, 2, 3].indexOf(2)": 1,
    "['a', 'b', 'b', 'c'].lastIndexOf('b')": 2, "[true].indexOf(1)": -1, "'abc'.indexOf('c')": 2,
    "'abc 123'.find('[0-9]+')": "123", "'abc'.find('z')": "", "'1 a 2'.findAll('[0-9]')": ["1", "2"],
    "'1 a 2'.findAll('[0-9]', 1)": ["1"],
    "isURL('https://user:pass@example.com:80/path?query=val#fragment')": True, "isURL('/absolute-path')": True,
    "isURL('https://a:b:c/')": False, "isURL('../relative-path')": False,
    "url('https://[::1]:80/').getHostname()": "::1", "url('https://example.com:80/').getPort()": "80",
    "url('https://example.com/path with spaces/').getEscapedPath()": "/path%20with%20spaces/",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()": {"k1": ["a"], "k2": ["b", "c"]},
    "isQuantity('1.3G')": True, "isQuantity('200K')": False, "quantity('1') == quantity('1000m')": True,
    "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')": True,
    "quantity('50M').compareTo(quantity('50Mi'))": -1, "quantity('9999999999999999999999999999999999999G').isInteger()":
        False, "quantity('50k').asInteger()": 50000, "quantity('150Mi').isGreaterThan(quantity('100Mi'))": True,
    "isIP('::ffff:127.0.0.1')": False, "ip('::1') == ip('0:0::1')": True, "ip('10.0.0.1').isGlobalUnicast()": True,
    "ip.isCanonical('2001:DB8::ABCD')": False, "string(ip('2001:DB8::ABCD'))": "2001:db8::abcd",
    "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))": True,
    "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')": True, "isCIDR('10.0.0.0')": False,
    "sets.equivalent([1, 2], [2, 1, 1])": True, "'%s is %d'.format(['x', 3])": "x is 3",
    "'AbC'.lowerAscii()": "abc", "'a,b'.split(',')": ["a", "b"], "'abcd'.substring(1, 3)": "bc",
}


@pytest.mark.parametrize("expression", list(LIBRARY))
def test_kubernetes_cel_library(expression):
    from kubetrain.validation.cel_library import environment

    result = environment().compile(expression).eval()
    value = result.plain_value()
    assert value == LIBRARY[expression] and type(value) is type(LIBRARY[expression])


@pytest.mark.parametrize("expression", ["[].min()", "quantity('x')", "url('../x')", "ip('1.2.3.04')",
                                        "quantity('1e40').asInteger()", "[9223372036854775807, 1].sum()"])
def test_kubernetes_cel_library_errors_are_errors(expression):
    from cel_expr_python import cel
    from kubetrain.validation.cel_library import environment

    assert environment().compile(expression).eval().type() == cel.Type.ERROR


# -- raw objects of kinds kubetrain ships no schema for, with the user's CRDs ------------------------------

def rule_set(**changes: Any) -> dict[str, Any]:
    rule = {"alert": "TrainingStalled", "expr": "rate(kubetrain_steps_total[10m]) == 0", "for": "15m",
            "labels": {"severity": "page"}}
    rule.update(changes)
    return {"apiVersion": "rules.example.com/v1", "kind": "RuleSet",
            "metadata": {"name": "training", "namespace": "ml-prod"},
            "spec": {"groups": [{"name": "training", "rules": [rule]}]}}


def _app_with(raw: dict[str, Any]):
    import cdk8s
    from kubetrain import App, Cluster

    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml-prod"])
    cdk8s.ApiObject(cluster, "alerts", api_version=raw["apiVersion"], kind=raw["kind"],
                    metadata=cdk8s.ApiObjectMetadata(name="training", namespace="ml-prod")).add_json_patch(
        cdk8s.JsonPatch.add("/spec", raw["spec"]))
    return app


def _synth_lines(app, tmp_path: Path, crds: list[Path] | None = None) -> list[str]:
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    try:
        synth(app, tmp_path / "dist", crds=crds)
    except ConfigError as error:
        return error.lines()
    return []


def test_a_raw_object_of_an_unknown_kind_fails_without_its_crd_and_names_the_options(tmp_path):
    (line,) = _synth_lines(_app_with(rule_set()), tmp_path)
    assert "unknown kind rules.example.com/v1 RuleSet" in line and "[KT602]" in line
    assert "`--crds DIR` (kubetrain synth and validate) or `kubetrain.add_crds(app, DIR)`" in line


def test_a_raw_object_passes_with_its_crd_from_synth_crds_or_the_fleet(tmp_path):
    from kubetrain import add_crds

    assert _synth_lines(_app_with(rule_set()), tmp_path, crds=[FIXTURE_CRDS]) == []
    app = _app_with(rule_set())
    add_crds(app, FIXTURE_CRDS)
    assert _synth_lines(app, tmp_path) == []
    assert (tmp_path / "dist" / "prod" / "ml-prod" / "RuleSet.training.yaml").is_file()


def test_a_raw_object_with_a_bad_field_or_failing_a_crd_rule_fails_with_its_crd(tmp_path):
    line, _ = _synth_lines(_app_with(rule_set(exprr="up")), tmp_path, crds=[FIXTURE_CRDS])
    assert "spec.groups[0].rules[0]: Additional properties are not allowed ('exprr' was unexpected)" in line
    assert "[KT602]" in line and "[KT606]" in _
    (line,) = _synth_lines(_app_with(rule_set(record="job:steps:rate10m")), tmp_path, crds=[FIXTURE_CRDS])
    assert "spec.groups[0].rules[0]: a rule is either an alert or a recording rule" in line and "[KT604]" in line
    twice = rule_set()
    twice["spec"]["groups"].append(copy.deepcopy(twice["spec"]["groups"][0]))
    (line,) = _synth_lines(_app_with(twice), tmp_path, crds=[FIXTURE_CRDS])
    assert "spec.groups: group names repeat: training, training" in line


def test_a_crd_folder_that_is_not_one_is_bad_input_at_synth(tmp_path):
    (line,) = _synth_lines(_app_with(rule_set()), tmp_path, crds=[tmp_path / "missing"])
    assert f"{tmp_path / 'missing'} is not a folder" in line and "[KT605]" in line
    assert not (tmp_path / "dist").exists()


@pytest.mark.processes
def test_synth_crds_option(tmp_path):
    from conftest import kubetrain

    project = tmp_path / "project"
    (project / "fleet").mkdir(parents=True)
    (project / "fleet" / "__init__.py").write_text(
        "import cdk8s\nfrom kubetrain import App, Cluster\n\n\ndef build():\n    app = App()\n"
        "    cluster = Cluster(app, 'prod', kubernetes_version='1.33', namespaces=['ml-prod'])\n"
        "    cdk8s.ApiObject(cluster, 'alerts', api_version='rules.example.com/v1', kind='RuleSet',\n"
        "                    metadata=cdk8s.ApiObjectMetadata(name='training', namespace='ml-prod')).add_json_patch(\n"
        f"        cdk8s.JsonPatch.add('/spec', {rule_set()['spec']!r}))\n    return app\n")
    failed = kubetrain("synth", "--app", "fleet", cwd=project)
    assert failed.returncode == 2 and "--crds DIR" in failed.stderr and "Traceback" not in failed.stderr
    passed = kubetrain("synth", "--app", "fleet", "--crds", str(FIXTURE_CRDS), cwd=project)
    assert passed.returncode == 0, passed.stderr
    checked = kubetrain("validate", str(project / "dist"), "--crds", str(FIXTURE_CRDS))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.processes
def test_every_option_output_names_exists():
    """The fixes and messages of synth's steps (output/, validation/, pipeline.py) name only command-line options
    the commands have."""
    import re

    from conftest import kubetrain

    named = set()
    package = ROOT / "constructs" / "kubetrain"
    for source in [*(package / "output").glob("*.py"), *(package / "validation").glob("*.py"), package / "pipeline.py"]:
        named |= set(re.findall(r"`?(--[a-z][a-z-]+)", source.read_text()))
    helps = kubetrain("synth", "--help").stdout + kubetrain("validate", "--help").stdout
    assert named and all(option in helps for option in named), sorted(o for o in named if o not in helps)
