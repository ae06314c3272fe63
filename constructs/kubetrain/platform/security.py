"""Security by default: Pod Security levels on namespaces, and the rule that pods keep to them.

kubetrain's own pods are never privileged, mount no host paths and no service-account token; the
cluster's namespaces are labelled for Pod Security `baseline` (enforced) with `restricted` audited
and warned about. A pod that needs more (the DCGM exporter reads the kubelet's pod-resources socket
from the host and needs SYS_ADMIN) goes to a namespace of its own labelled `privileged`.

    PodSecurity(cluster, "pod-security", level="baseline")    # labels the cluster's namespaces
    pod_security_problems(pod_spec, "baseline")               # KT430, for any pod kubetrain emits

Jobs and other pods are checked against their namespace's level with `check_pod_security`, which
keeps the check: a PodSecurity created after them (the order of a fleet's code is free) reports what
its stricter level adds, so no pod escapes the check by being defined first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from kubetrain.cluster import Cluster
from kubetrain.model.names import Dns1123Label
from kubetrain.model.strict import StrictProps
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain.rules.sources import PSS
from kubetrain.state import Level, PodCheck
from kubetrain_runtime.problems import INVALID_VALUE, Problem, rule_violation

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
_ORDER = {"privileged": 0, "baseline": 1, "restricted": 2}
# Capabilities the baseline level allows to be added (Kubernetes Pod Security Standards).
_BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                          "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret", "name"}

POD_SECURITY = register(
    "KT430", "error", "pod breaks the security defaults or its namespace's Pod Security level",
    rationale="Training pods need no privileges: a privileged container, a host path, host namespaces or added "
              "capabilities give a compromised job the node, and a mounted service-account token gives it the "
              "API. The namespace's Pod Security label makes the API server refuse such pods; kubetrain refuses "
              "them at synth, with the field to change.",
    fix="drop the privilege; a pod that truly needs it (a node agent) belongs in a namespace of its own "
        "labelled privileged",
    source=PSS)


def pod_security_labels(level: Level, audit: Level = "restricted") -> dict[str, str]:
    """Namespace labels: `level` enforced, `audit` (at least as strict) audited and warned about."""
    audit = audit if _ORDER[audit] >= _ORDER[level] else level
    return {ENFORCE_LABEL: level, "pod-security.kubernetes.io/audit": audit, "pod-security.kubernetes.io/warn": audit}


def pod_security_problems(pod_spec: Mapping[str, Any], level: Level, path: str = "spec",
                          token_allowed: bool = False) -> list[Problem]:
    """KT430: what in `pod_spec` the `level` (and kubetrain's no-token default) forbids."""
    problems: list[Problem] = []

    def bad(where: str, message: str) -> None:
        problems.append(Problem(POD_SECURITY.code, f"{path}.{where}" if path else where, message, POD_SECURITY.fix))

    if not token_allowed and pod_spec.get("automountServiceAccountToken") is not False:
        bad("automountServiceAccountToken", "the service-account token is mounted (set it false)")
    if level == "privileged":
        return problems
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(host):
            bad(host, f"{host} is not allowed at Pod Security {level}")
    for i, volume in enumerate(pod_spec.get("volumes") or []):
        if "hostPath" in volume:
            bad(f"volumes.{i}.hostPath", f"host path {volume['hostPath'].get('path')} is not allowed at {level}")
        elif level == "restricted" and set(volume) - _RESTRICTED_VOLUMES:
            bad(f"volumes.{i}", f"volume type {sorted(set(volume) - _RESTRICTED_VOLUMES)} is not allowed at restricted")
    pod_context = pod_spec.get("securityContext") or {}
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(pod_spec.get(kind) or []):
            where = f"{kind}.{i}.securityContext"
            context = container.get("securityContext") or {}
            if context.get("privileged"):
                bad(f"{where}.privileged", "privileged containers are not allowed")
            added = set((context.get("capabilities") or {}).get("add") or [])
            extra = added - (_BASELINE_CAPABILITIES if level == "baseline" else {"NET_BIND_SERVICE"})
            if extra:
                bad(f"{where}.capabilities.add", f"capabilities {sorted(extra)} are not allowed at {level}")
            for j, port in enumerate(container.get("ports") or []):
                if port.get("hostPort"):
                    bad(f"{kind}.{i}.ports.{j}.hostPort", "host ports are not allowed")
            if level == "restricted":
                if context.get("allowPrivilegeEscalation") is not False:
                    bad(f"{where}.allowPrivilegeEscalation", "restricted needs allowPrivilegeEscalation: false")
                if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
                    bad(f"{where}.capabilities.drop", "restricted needs capabilities.drop: [ALL]")
                if not (context.get("runAsNonRoot") or pod_context.get("runAsNonRoot")):
                    bad(f"{where}.runAsNonRoot", "restricted needs runAsNonRoot: true")
                if (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type") not in (
                        "RuntimeDefault", "Localhost"):
                    bad(f"{where}.seccompProfile", "restricted needs seccompProfile RuntimeDefault")
    return problems


def namespace_level(cluster: Cluster, namespace: str) -> Level:
    """The Pod Security level a namespace enforces ('privileged' when nothing labelled it)."""
    return cluster.state.pod_security.get(namespace, "privileged")


def check_pod_security(cluster: Cluster, namespace: str, where: str, check: PodCheck) -> list[Problem]:
    """A pod's problems at its namespace's level now. The check is kept: labelling the namespace later
    (PodSecurity) reports, under `where`, what the stricter level adds."""
    cluster.state.pod_checks.append((namespace, where, check))
    return check(namespace_level(cluster, namespace))


def _recheck(cluster: Cluster, namespace: str, before: Level, level: Level) -> None:
    for checked, where, check in cluster.state.pod_checks:
        if checked == namespace:
            reported = check(before)
            cluster.diagnostics.report(where, [p for p in check(level) if p not in reported])


class PodSecurityProps(StrictProps):
    level: Literal["baseline", "restricted"] = Field("baseline", description="Enforced on the cluster's namespaces "
                                                     "(baseline: EFA jobs need huge pages and a memory /dev/shm, "
                                                     "both allowed; restricted also needs non-root images).")
    audit: Literal["baseline", "restricted"] = Field("restricted", description="Audited and warned about.")
    namespaces: list[Dns1123Label] | None = Field(None, description="Default: every namespace of the cluster.")

    @model_validator(mode="after")
    def _audit_at_least_enforced(self) -> PodSecurityProps:
        if self.level == "restricted" and self.audit == "baseline":
            raise rule_violation(INVALID_VALUE, "audit is baseline under an enforced restricted level: every pod it "
                                 "would report is refused already", "audit at the enforced level or above "
                                 "(audit='restricted')", field="audit")
        return self


class PodSecurity(PlatformConstruct):
    """Labels the cluster's namespaces (the Namespace objects the Cluster made) for Pod Security."""

    Props = PodSecurityProps
    kind = "podsecurity"

    def __init__(self, scope: Cluster, id: str = "pod-security", props: PodSecurityProps | Mapping[str, Any] |
                 None = None, **kwargs: Any):
        super().__init__(scope, id, props, kwargs, named=False)
        namespaces = self.props.namespaces or scope.props.namespaces
        problems = [q for n in namespaces for q in scope.check_namespace(n)[1]]
        if self._emit(problems):
            labels = pod_security_labels(self.props.level, self.props.audit)
            for namespace in namespaces:
                metadata = scope.namespaces[namespace].manifest["metadata"]
                metadata["labels"] = {**metadata.get("labels", {}), **labels}
                before = namespace_level(scope, namespace)
                scope.state.pod_security[namespace] = self.props.level
                _recheck(scope, namespace, before, self.props.level)
