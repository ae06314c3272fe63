"""The Prometheus operator's kinds (monitoring.coreos.com/v1, v0.93.0): the DCGM exporter's ServiceMonitor, the
training pods' PodMonitor (kubetrain.platform.gpu_monitoring builds them) and the training alerts' PrometheusRule
(kubetrain.platform.alerts), configuration in the platform wave. The PodMonitor and ServiceMonitor CRDs are the
project's example/prometheus-operator-crd/ files at v0.93.0; the PrometheusRule CRD is the same folder's at the
same tag.
"""

from __future__ import annotations

from typing import Any

import promql_parser

from kubetrain.kinds.base import PLATFORM, CrdSource, Kind, Manifest, Sibling
from kubetrain.rules.registry import register

ALERTING_RULES = "https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/"
RULE_FILE_CHECKS = "https://github.com/prometheus/prometheus/blob/v3.5.0/model/rulefmt/rulefmt.go (RuleNode.Validate)"

BAD_EXPRESSION = register(
    "KT475", "error", "alert expression that is not PromQL",
    rationale="The Prometheus operator accepts the PrometheusRule, and Prometheus then refuses to load the rule "
              "file: none of the group's alerts evaluates, without a word in the pull request.",
    fix="correct the expression (promtool check rules shows the same error)", source=ALERTING_RULES)
BAD_RULE = register(
    "KT478", "error", "a rule Prometheus refuses to load",
    rationale="The PrometheusRule CRD's schema takes any mix of alert, record, for and annotations; Prometheus "
              "then refuses the whole rule file (every group of the object) when a rule is both an alert and a "
              "record or neither, a recording rule has for, keep_firing_for or annotations, or a group name is "
              "empty or repeated.",
    fix="make each rule either an alert (alert, expr, for, labels, annotations) or a record (record, expr, "
        "labels), in groups of distinct names", source=RULE_FILE_CHECKS)


def parse_promql(expr: str) -> tuple[Any, str | None]:
    """(the parsed expression, None), or (None, why it is not PromQL): what Prometheus's parser says of it."""
    try:
        return promql_parser.parse(expr), None
    except Exception as error:  # the parser raises ValueError or its own errors, naming the position
        return None, " ".join(str(error).split())


def rule_problems(obj: Manifest, sibling: Sibling) -> list[tuple[str, str, str]]:
    """What Prometheus refuses when it loads a PrometheusRule's rule file (model/rulefmt's checks): (path, message
    and fix, code)."""
    found = []
    names: set[str] = set()
    for i, group in enumerate((obj.get("spec") or {}).get("groups") or []):
        if not isinstance(group, dict):
            continue
        name = group.get("name")
        if name in names:
            found.append((f"spec.groups[{i}].name", f"group {name!r} is repeated; fix: give each group its own name",
                          BAD_RULE.code))
        names.add(name)
        for j, rule in enumerate(group.get("rules") or []):
            if isinstance(rule, dict):
                found += [(f"spec.groups[{i}].rules[{j}]{field}", message, code)
                          for field, message, code in _rule_problems(rule)]
    return found


def _rule_problems(rule: dict[str, Any]) -> list[tuple[str, str, str]]:
    alert, record = rule.get("alert"), rule.get("record")
    found = []
    if alert and record:
        found.append((".record", f"the rule is both alert {alert!r} and record {record!r}; fix: split it into an "
                      "alerting rule and a recording rule", BAD_RULE.code))
    elif not alert and not record:
        found.append(("", "the rule is neither an alert nor a record; fix: name it, alert: <Name> or record: "
                      "<level:metric:operations>", BAD_RULE.code))
    elif record:
        found += [(f".{key}", f"recording rule {record!r} has {key}, which only alerting rules take; fix: remove "
                   f"{key}, or make the rule an alert", BAD_RULE.code)
                  for key in ("for", "keep_firing_for", "annotations") if rule.get(key)]
    expr = str(rule.get("expr") if rule.get("expr") is not None else "")
    if not expr.strip():
        found.append((".expr", f"the expression is empty; fix: {BAD_EXPRESSION.fix}", BAD_EXPRESSION.code))
    elif (error := parse_promql(expr)[1]) is not None:
        found.append((".expr", f"not PromQL: {error}; fix: {BAD_EXPRESSION.fix}", BAD_EXPRESSION.code))
    return found


def _monitoring_crd(name: str) -> CrdSource:
    return CrdSource(f"monitoring.coreos.com_{name}.yaml", "prometheus-operator/prometheus-operator", "v0.93.0",
                     (API_VERSION,))


API_VERSION = "monitoring.coreos.com/v1"


KINDS = (
    Kind(API_VERSION, "ServiceMonitor", PLATFORM, crd=_monitoring_crd("servicemonitors")),
    Kind(API_VERSION, "PodMonitor", PLATFORM, crd=_monitoring_crd("podmonitors")),
    Kind(API_VERSION, "PrometheusRule", PLATFORM, crd=_monitoring_crd("prometheusrules"), admission=rule_problems),
)
