"""PriorityClass: how the scheduler ranks a job's pods against other pods, and whether they preempt them; and
Toleration, the taints pods (or a Kueue ResourceFlavor, for the pods it admits) tolerate.

    high = PriorityClass(cluster, "training-high", value=100000, description="production pretraining")
    TrainingJob(cluster, "gpt", ..., pod=PodSettings(priority_class=high))

A `scheduling.k8s.io/v1` PriorityClass is cluster-scoped (dist/<cluster>/_cluster/) and synced in an earlier Argo
CD wave than the runs: the API server's Priority admission plugin refuses a pod whose class does not exist yet.
Checked as that plugin and the API server's validation check it (KT152): a user class's value is at most
1,000,000,000 (higher values are the system classes'), the `system-` prefix is reserved for
system-node-critical and system-cluster-critical (admitted only in kube-system), and one class at most in the
cluster is the global default. A job given a class object of another cluster is refused (KT153).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kubetrain.cluster import Cluster
from kubetrain.kinds.kubernetes import SCHEDULING_API_VERSION
from kubetrain.model.names import Dns1123Subdomain, LabelKey, LabelValue
from kubetrain.model.strict import StrictProps
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_CORE_VALIDATION, PRIORITY, cite
from kubetrain_runtime.problems import Problem, Text, rule_violation

HIGHEST_USER_PRIORITY = 1_000_000_000  # k8s.io/api/scheduling/v1: HighestUserDefinablePriority

PRIORITY_CLASS_INVALID = register(
    "KT152", "error", "priority class the API server refuses",
    rationale="Values above 1,000,000,000 belong to the system classes, the 'system-' prefix is reserved for "
              "system-node-critical and system-cluster-critical (admitted only in kube-system), and a cluster "
              "has at most one global default class; the API server refuses any other PriorityClass, and the "
              "Priority admission plugin refuses a pod that names a system class outside kube-system.",
    fix="use a value of at most 1000000000, a name without the system- prefix, and one global default at most",
    source=cite(PRIORITY, "https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/apis/scheduling/validation/"
                          "validation.go"))
OTHER_PLACE = register(
    "KT153", "error", "refers to a priority class or service account the pods cannot use",
    rationale="A PriorityClass is the cluster's: a job given one of another cluster names a class its own cluster "
              "does not have, and the Priority admission plugin refuses its pods. A pod runs as a ServiceAccount of "
              "its own namespace only: one of another namespace (or cluster) is refused when the pod is created.",
    fix="give the job a PriorityClass of its own cluster and a ServiceAccount of its own namespace",
    source=cite(PRIORITY, "https://kubernetes.io/docs/concepts/security/service-accounts/"))


def _value(value: int) -> int:
    if value > HIGHEST_USER_PRIORITY:
        raise rule_violation(PRIORITY_CLASS_INVALID.code, f"value {value} is above {HIGHEST_USER_PRIORITY:,}, the "
                             "highest a user's class may have (higher values are the system classes')",
                             f"use a value of at most {HIGHEST_USER_PRIORITY}")
    if value < -(2**31):
        raise rule_violation(PRIORITY_CLASS_INVALID.code, f"value {value} is below the int32 range",
                             f"use a value of at least {-(2**31)}")
    return value


def not_a_system_class(value: str) -> str:
    """The API server reserves the system- prefix for its two system classes, admitted only in kube-system."""
    if value.startswith("system-"):
        raise rule_violation(PRIORITY_CLASS_INVALID.code, f"{value!r}: the system- prefix is reserved for "
                             "system-node-critical and system-cluster-critical, admitted only in kube-system",
                             "use a class of your own for training (e.g. training-high)")
    return value


class PriorityClassProps(StrictProps):
    name: Dns1123Subdomain = Field(..., description="The class's name; defaults to the construct id.")
    value: int = Field(..., description="Higher schedules first (and preempts lower, unless preemption_policy "
                                        "is Never). At most 1,000,000,000.")
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        "PreemptLowerPriority", description="'Never': the pods wait ahead of lower ones in the queue but evict "
                                            "nothing (a preempted training pod loses its work since the last "
                                            "checkpoint).")
    global_default: bool = Field(False, description="The class of pods that name none; one per cluster at most.")
    description: Text = Field("", description="What the class is for.")

    _name = field_validator("name")(not_a_system_class)
    _in_range = field_validator("value")(_value)


class PriorityClass(PlatformConstruct):
    """A cluster-scoped PriorityClass that jobs take as an object (`PodSettings(priority_class=...)`)."""

    Props = PriorityClassProps
    kind = "priorityclass"

    def __init__(self, scope: Cluster, id: str, props: PriorityClassProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.name: str = p.name
        problems = []
        if p.global_default:
            other = scope.state.default_priority_class
            if other is not None:
                problems.append(Problem(PRIORITY_CLASS_INVALID.code, "global_default", f"{other} is already the "
                                        "cluster's global default", "keep one global default class"))
            else:
                scope.state.default_priority_class = p.name
        manifest: dict[str, Any] = {"apiVersion": SCHEDULING_API_VERSION, "kind": "PriorityClass",
                                    "metadata": {"name": p.name}, "value": p.value,
                                    "preemptionPolicy": p.preemption_policy, "globalDefault": p.global_default}
        if p.description:
            manifest["description"] = p.description
        self._emit(problems, [manifest])


# -- tolerations ---------------------------------------------------------------------------------

TOLERATION = register(
    "KT130", "error", "toleration the API server refuses",
    rationale="An empty key tolerates every taint and only with operator Exists; Exists matches any value, so it "
              "takes none; tolerationSeconds says how long a pod stays on a node tainted NoExecute, so it needs that "
              "effect. The API server refuses the pod otherwise, after the job was merged.",
    fix="give the taint's key (or operator Exists alone to tolerate every taint), no value with Exists, and "
        "toleration_seconds only with effect NoExecute",
    source=K8S_CORE_VALIDATION)


class Toleration(StrictProps):
    """A taint the pods tolerate (Kubernetes' Toleration)."""

    key: LabelKey | None = Field(None, description="Taint key; empty with operator Exists tolerates every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal")
    value: LabelValue | None = Field(None, description="Taint value, for operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Default: all.")
    toleration_seconds: int | None = Field(None, ge=0, description="NoExecute only: how long the pod stays.")

    @model_validator(mode="after")
    def _as_the_api_server_takes_it(self) -> Toleration:
        if not self.key and self.operator != "Exists":
            raise rule_violation(TOLERATION.code, f"operator {self.operator} needs a key: an empty key tolerates every "
                                 "taint, with operator Exists only", "give the taint's key, or set operator='Exists' "
                                 "to tolerate every taint", field="operator")
        if self.operator == "Exists" and self.value:
            raise rule_violation(TOLERATION.code, f"operator Exists matches any value, so it takes none (got "
                                 f"{self.value!r})", "drop value, or use operator 'Equal' to match that value",
                                 field="operator")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise rule_violation(TOLERATION.code, f"toleration_seconds applies to effect NoExecute only, not "
                                 f"{self.effect or 'every effect'}", "set effect='NoExecute', or drop "
                                 "toleration_seconds", field="toleration_seconds")
        return self

    def manifest(self) -> dict[str, Any]:
        out = {"key": self.key, "operator": self.operator, "value": self.value, "effect": self.effect,
               "tolerationSeconds": self.toleration_seconds}
        return {k: v for k, v in out.items() if v is not None}
