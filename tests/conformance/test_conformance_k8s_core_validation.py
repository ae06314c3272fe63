"""Kubernetes' own pod, volume, environment, probe, Secret and ConfigMap validation cases, as data.

Each row is a case of kubernetes/kubernetes@b1ce15c54586 pkg/apis/core/validation/validation_test.go (the test function and the
case's name), transcribed as the v1 object a user commits, and checked against kubetrain's API-server check: a valid
case has no finding, an invalid one is refused at the field the upstream test names. Where a row's path or verdict
differs on purpose, its `note` says why (and the README's Choices, "What the API server checks").
"""

from __future__ import annotations

import base64

import pytest
from conformance_rows import K8S, at, Row, check, pod

FILE = "pkg/apis/core/validation/validation_test.go"
SOURCE = at("b1ce15c54586daabffbc79d6ef36feabbf5a0875", FILE)
Case = Row.citing(SOURCE)
AA = "container.apparmor.security.beta.kubernetes.io/"
C0 = "spec.containers[0]"


def toleration(**fields) -> dict:
    return pod({"tolerations": [fields]})


def resources(requests: dict, limits: dict, *, init: bool = False) -> dict:
    body = {"name": "invalid", "resources": {"requests": requests, "limits": limits}}
    return pod(init=body) if init else pod(container=body)


def pod_app_armor(profile: dict) -> dict:
    return pod({"securityContext": {"appArmorProfile": profile}})


def container_app_armor(profile: dict, annotations: dict | None = None) -> dict:
    return pod(container={"securityContext": {"appArmorProfile": profile}}, annotations=annotations)


def affinity_term(kind: str, preferred: bool, **term) -> dict:
    expression = {"key": "key", "operator": "NotIn", "values": ["value1", "value2"]}
    body = {"labelSelector": {"matchExpressions": [expression]},
            "topologyKey": "k8s.io/zone", **term}
    rules = ({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": body}]}
             if preferred else {"requiredDuringSchedulingIgnoredDuringExecution": [body]})
    return pod({"affinity": {kind: rules}})


def affinity_path(kind: str, preferred: bool, rest: str) -> str:
    return (f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.{rest}"
            if preferred else f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[0].{rest}")


def env(*variables: dict) -> dict:
    return pod(container={"env": list(variables)})


def field_env(field_path: str, name: str = "abc") -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}}


def env_from(*sources: dict) -> dict:
    return pod(container={"envFrom": list(sources)})


def volume(source: dict, name: str = "vol") -> dict:
    return pod({"volumes": [{"name": name, **source}]})


def csi(**source) -> dict:
    return volume({"csi": source}, name="csi")


def config_map_volume(**source) -> dict:
    return volume({"configMap": {"name": "c", **source}}, name="cfgmap")


def downward(*items: dict, **source) -> dict:
    body = dict(source)
    if items:
        body["items"] = list(items)
    return volume({"downwardAPI": body}, name="downapi")


def labels_file(path: str, **extra) -> dict:
    return {"path": path, "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}, **extra}


def probe(handler: dict, kind: str = "readinessProbe") -> dict:
    return pod(container={kind: handler})


def http_get(**action) -> dict:
    return {"httpGet": action}


def secret(kind: str, data: dict[str, bytes], annotations: dict | None = None) -> dict:
    meta = {"name": "foo", "namespace": "bar", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": kind,
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()}}


def service(**spec) -> dict:
    """makeValidService(): a ClusterIP Service "valid" with one port p 8675/TCP and a selector."""
    body = {"selector": {"key": "val"}, "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy":
            "Cluster", "ports": [{"name": "p", "protocol": "TCP", "port": 8675, "targetPort": 8675}], **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "valid", "namespace": "valid"}, "spec": body}


def app_protocol(value: str) -> dict:
    return service(ports=[{"port": 12345, "targetPort": 12345, "protocol": "TCP", "appProtocol": value}])


LOAD_BALANCER = {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": True}


def config_map(data: dict | None = None, binary: dict | None = None, name: str = "validname") -> dict:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "validns"}}
    if data is not None:
        body["data"] = data
    if binary is not None:
        body["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
    return body


DOCKERCFG = b'{"https://index.docker.io/v1/": {"auth": "Y2x1ZWRyb29sZXIwMDAxOnBhc3N3b3Jk","email": "fake@example.com"}}'
DOCKER_CONFIG_JSON = (b'{"auths":{"https://index.docker.io/v1/": {"auth": "Y2x1ZWRyb29sZXIwMDAxOnBhc3N3b3Jk",'
                      b'"email": "fake@example.com"}}}')
SA = "kubernetes.io/service-account-token"
SA_NAME = "kubernetes.io/service-account.name"
EMPTY_TERM = {"matchExpressions": []}

ROWS = [
    # -- TestValidatePod: success cases
    Case("TestValidatePod", "basic fields", pod(), None),
    Case("TestValidatePod", "just about everything", pod(
        {"volumes": [{"name": "vol", "emptyDir": {}}], "nodeSelector": {"key": "value"}, "nodeName": "foobar",
         "serviceAccountName": "acct"}, name="abc.123.do-re-mi", init={"name": "ictr"}), None),
    Case("TestValidatePod", "serialized node affinity requirements", pod({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "key2", "operator": "In", "values": ["value1", "value2"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {
            "matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}}]}}}), None),
    Case("TestValidatePod", "serialized node affinity requirements, II", pod({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [EMPTY_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": EMPTY_TERM}]}}}),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
        note="stricter on purpose: the API server accepts a required term without expressions, and the scheduler "
             "then places the pod on no node (a training pod that never starts)"),
    Case("TestValidatePod", "serialized pod affinity in affinity requirements in annotations", pod({"affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "key2", "operator": "In", "values": ["value1", "value2"]}]},
            "topologyKey": "zone", "namespaces": ["ns"], "namespaceSelector": {"matchExpressions": [
                {"key": "key", "operator": "In", "values": ["value1", "value2"]}]}}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
                "labelSelector": {"matchExpressions": [
                    {"key": "key2", "operator": "NotIn", "values": ["value1", "value2"]}]},
                "namespaces": ["ns"], "topologyKey": "region"}}]}}}), None),
    Case("TestValidatePod", "populate forgiveness tolerations with exists operator in annotations.", toleration(
        key="foo", operator="Exists", value="", effect="NoExecute", tolerationSeconds=60), None),
    Case("TestValidatePod", "populate forgiveness tolerations with equal operator in annotations.", toleration(
        key="foo", operator="Equal", value="bar", effect="NoExecute", tolerationSeconds=60), None),
    Case("TestValidatePod", "empty key with Exists operator is OK for toleration, empty toleration key means match "
        "all taint keys.", toleration(operator="Exists", effect="NoSchedule"), None),
    Case("TestValidatePod", "empty operator is OK for toleration, defaults to Equal.", toleration(
        key="foo", value="bar", effect="NoSchedule"), None),
    Case("TestValidatePod", "negative tolerationSeconds is OK for toleration.", toleration(
        key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute", tolerationSeconds=-2), None),
    Case("TestValidatePod", "default AppArmor annotation for a container", pod(
        annotations={f"{AA}ctr": "runtime/default"}), None),
    Case("TestValidatePod", "default AppArmor annotation for an init container", pod(
        init={"name": "init-ctr"}, annotations={f"{AA}init-ctr": "runtime/default"}), None),
    Case("TestValidatePod", "localhost AppArmor annotation for a container", pod(
        annotations={f"{AA}ctr": "localhost/foo"}), None),
    Case("TestValidatePod", "runtime default AppArmor profile for a pod", pod_app_armor({"type": "RuntimeDefault"}),
        None),
    Case("TestValidatePod", "unconfined AppArmor profile for a container", container_app_armor({"type": "Unconfined"}),
        None),
    Case("TestValidatePod", "localhost AppArmor profile for a pod", pod_app_armor(
        {"type": "Localhost", "localhostProfile": "example-org/application-foo"}), None),
    Case("TestValidatePod", "localhost AppArmor profile for a container field", container_app_armor(
        {"type": "Localhost", "localhostProfile": "example-org/application-foo"}), None),
    Case("TestValidatePod", "matching AppArmor fields and annotations", container_app_armor(
        {"type": "Localhost", "localhostProfile": "foo"}, {f"{AA}ctr": "localhost/foo"}), None),
    Case("TestValidatePod", "syntactically valid sysctls", pod({"securityContext": {"sysctls": [
        {"name": "kernel.shmmni", "value": "32768"}, {"name": "kernel.shmmax", "value": "1000000000"},
        {"name": "knet.ipv4.route.min_pmtu", "value": "1000"}]}}), None),
    Case("TestValidatePod", "valid extended resources for init container", resources(
        {"example.com/a": "10"}, {"example.com/a": "10"}, init=True), None),
    Case("TestValidatePod", "valid extended resources for regular container", resources(
        {"example.com/a": "10"}, {"example.com/a": "10"}), None),
    # -- TestValidatePod: error cases
    Case("TestValidatePod", "invalid toleration key", toleration(
        key="nospecialchars^=@", operator="Equal", value="bar", effect="NoSchedule"), "spec.tolerations[0].key"),
    Case("TestValidatePod", "invalid toleration operator", toleration(
        key="foo", operator="In", value="bar", effect="NoSchedule"), "spec.tolerations[0].operator"),
    Case("TestValidatePod", "value must be empty when `operator` is 'Exists'", toleration(
        key="foo", operator="Exists", value="bar", effect="NoSchedule"), "spec.tolerations[0].operator"),
    Case("TestValidatePod", "operator must be 'Exists' when `key` is empty", toleration(
        operator="Equal", value="bar", effect="NoSchedule"), "spec.tolerations[0].operator"),
    Case("TestValidatePod", "effect must be 'NoExecute' when `TolerationSeconds` is set", toleration(
        key="node.kubernetes.io/not-ready", operator="Exists", effect="NoSchedule", tolerationSeconds=20),
        "spec.tolerations[0].effect"),
    Case("TestValidatePod", "AppArmor profile must apply to a container", pod(init={"name": "init-ctr"}, annotations={
        f"{AA}ctr": "runtime/default", f"{AA}init-ctr": "runtime/default", f"{AA}fake-ctr": "runtime/default"}),
        f"metadata.annotations[{AA}fake-ctr]"),
    Case("TestValidatePod", "AppArmor profile format must be valid", pod(annotations={f"{AA}ctr": "bad-name"}),
        f"metadata.annotations[{AA}ctr]"),
    Case("TestValidatePod", "only default AppArmor profile may start with runtime/", pod(
        annotations={f"{AA}ctr": "runtime/foo"}), f"metadata.annotations[{AA}ctr]"),
    Case("TestValidatePod", "unsupported pod AppArmor profile type", pod_app_armor({"type": "test"}),
        "spec.securityContext.appArmorProfile.type"),
    Case("TestValidatePod", "unsupported container AppArmor profile type", container_app_armor({"type": "test"}),
        f"{C0}.securityContext.appArmorProfile.type"),
    Case("TestValidatePod", "missing pod AppArmor profile type", pod_app_armor({"type": ""}),
        "spec.securityContext.appArmorProfile.type"),
    Case("TestValidatePod", "missing AppArmor localhost profile", pod_app_armor({"type": "Localhost"}),
        "spec.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "empty AppArmor localhost profile", pod_app_armor(
        {"type": "Localhost", "localhostProfile": ""}), "spec.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "invalid AppArmor localhost profile type", pod_app_armor(
        {"type": "RuntimeDefault", "localhostProfile": "foo-bar"}),
        "spec.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "invalid AppArmor localhost profile", pod_app_armor(
        {"type": "Localhost", "localhostProfile": "foo-bar "}),
        "spec.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "too long AppArmor localhost profile", pod_app_armor(
        {"type": "Localhost", "localhostProfile": "a" * 4096}),
        "spec.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "mismatched AppArmor field and annotation types", container_app_armor(
        {"type": "Unconfined"}, {f"{AA}ctr": "runtime/default"}), f"{C0}.securityContext.appArmorProfile.type"),
    Case("TestValidatePod", "mismatched AppArmor pod field and annotation types", pod(
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, annotations={f"{AA}ctr": "runtime/default"}),
        f"{C0}.securityContext.appArmorProfile.type"),
    Case("TestValidatePod", "mismatched AppArmor localhost profiles", container_app_armor(
        {"type": "Localhost", "localhostProfile": "bar"}, {f"{AA}ctr": "localhost/foo"}),
        f"{C0}.securityContext.appArmorProfile.localhostProfile"),
    Case("TestValidatePod", "invalid extended resource name in container request", resources(
        {"invalid-name": "2"}, {"invalid-name": "2"}), f"{C0}.resources.requests[invalid-name]"),
    Case("TestValidatePod", "invalid extended resource requirement: request must be == limit", resources(
        {"example.com/a": "2"}, {"example.com/a": "1"}), f"{C0}.resources.requests[example.com/a]"),
    Case("TestValidatePod", "invalid extended resource requirement without limit", resources(
        {"example.com/a": "2"}, {}), f"{C0}.resources.limits[example.com/a]"),
    Case("TestValidatePod", "invalid fractional extended resource in container request", resources(
        {"example.com/a": "500m"}, {}), f"{C0}.resources.requests[example.com/a]"),
    Case("TestValidatePod", "invalid fractional extended resource in init container request", resources(
        {"example.com/a": "500m"}, {}, init=True), "spec.initContainers[0].resources.requests[example.com/a]"),
    Case("TestValidatePod", "invalid fractional extended resource in container limit", resources(
        {"example.com/a": "5"}, {"example.com/a": "2.5"}), f"{C0}.resources.limits[example.com/a]"),
    Case("TestValidatePod", "invalid fractional extended resource in init container limit", resources(
        {"example.com/a": "2.5"}, {"example.com/a": "2.5"}, init=True),
        "spec.initContainers[0].resources.limits[example.com/a]"),
    Case("TestValidatePod", "invalid pod-deletion-cost", pod(
        annotations={"controller.kubernetes.io/pod-deletion-cost": "text"}),
        "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]"),
    Case("TestValidatePod", "invalid leading zeros pod-deletion-cost", pod(
        annotations={"controller.kubernetes.io/pod-deletion-cost": "008"}),
        "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]"),
    Case("TestValidatePod", "invalid leading plus sign pod-deletion-cost", pod(
        annotations={"controller.kubernetes.io/pod-deletion-cost": "+10"}),
        "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]"),
    Case("TestValidatePod", "invalid required node affinity, value of NodeSelectorRequirement should be a valid label "
        "value", pod({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["-1"]}]}]}}}}),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].values[0]"),
    *[Case("TestValidatePod", f"invalid {'soft' if preferred else 'hard'} pod {label}, key in MismatchLabelKeys isn't "
          "correctly defined", affinity_term(kind, preferred, mismatchLabelKeys=["/simple"]),
          affinity_path(kind, preferred, "mismatchLabelKeys[0]"))
      for kind, label in (("podAffinity", "affinity"), ("podAntiAffinity", "anti-affinity"))
      for preferred in (True, False)],
    *[Case("TestValidatePod", f"invalid {'soft' if preferred else 'hard'} pod {label}, key exists in both "
          "MatchLabelKeys and MismatchLabelKeys", affinity_term(
              kind, preferred, matchLabelKeys=["samekey"], mismatchLabelKeys=["samekey"]),
          affinity_path(kind, preferred, "matchLabelKeys[0]"))
      for kind, label in (("podAffinity", "affinity"), ("podAntiAffinity", "anti-affinity"))
      for preferred in (True, False)],
    # -- TestValidatePodSpec
    *[Case("TestValidatePodSpec", name, obj, None) for name, obj in (
        ("populate basic fields, leave defaults for most", pod()),
        ("populate all fields", pod({"volumes": [{"name": "vol", "emptyDir": {}}], "nodeSelector": {"key": "value"},
                                     "nodeName": "foobar", "activeDeadlineSeconds": 2**31 - 1,
                                     "serviceAccountName": "acct"}, init={"name": "ictr"})),
        ("populate HostNetwork", pod({"hostNetwork": True}, container={
            "ports": [{"hostPort": 8080, "containerPort": 8080, "protocol": "TCP"}]})),
        ("populate RunAsUser SupplementalGroups FSGroup with minID 0", pod({"securityContext": {
            "supplementalGroups": [0], "runAsUser": 0, "fsGroup": 0}})),
        ("populate RunAsUser SupplementalGroups FSGroup with maxID 2147483647", pod({"securityContext": {
            "supplementalGroups": [2**31 - 1], "runAsUser": 2**31 - 1, "fsGroup": 2**31 - 1}})),
        ("populate HostIPC", pod({"hostIPC": True})),
        ("populate HostPID", pod({"hostPID": True})),
        ("populate HostAliases", pod({"hostAliases": [{"ip": "12.34.56.78", "hostnames": ["host1", "host2"]}]})),
        ("populate HostAliases with `foo.bar` hostnames", pod({"hostAliases": [
            {"ip": "12.34.56.78", "hostnames": ["host1.foo", "host2.bar"]}]})),
        ("populate HostAliases with HostNetwork", pod({"hostNetwork": True, "hostAliases": [
            {"ip": "12.34.56.78", "hostnames": ["host1.foo", "host2.bar"]}]})),
        ("populate PriorityClassName", pod({"priorityClassName": "valid-name"})),
        ("populate ShareProcessNamespace", pod({"shareProcessNamespace": True})),
        ("populate RuntimeClassName", pod({"runtimeClassName": "valid-sandbox"})),
        ("populate FSGroupChangePolicy", pod({"securityContext": {"fsGroupChangePolicy": "Always"}})),
        ("resources resize policy for containers", pod(container={"resizePolicy": [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"}]})),
    )],
    Case("TestValidatePodSpec", "with hostNetwork hostPort unspecified", pod({"hostNetwork": True}, container={
        "ports": [{"hostPort": 0, "containerPort": 2600, "protocol": "TCP"}]}), None,
        note="defaulting: the test validates the internal pod as written; the API server first defaults a v1 pod's "
             "hostPort to its containerPort on the host's network, which this pod then has"),
    *[Case("TestValidatePodSpec", name, obj, path) for name, obj, path in (
        ("bad volume", pod({"volumes": [{}]}), "spec.volumes[0].name"),
        ("no containers", pod({"containers": []}), "spec.containers"),
        ("bad container", pod({"containers": [{}]}), "spec.containers[0].name"),
        ("bad init container", pod({"initContainers": [{}]}), "spec.initContainers[0].name"),
        ("bad DNS policy", pod({"dnsPolicy": "invalid"}), "spec.dnsPolicy"),
        ("bad service account name", pod({"serviceAccountName": "invalidName"}), "spec.serviceAccountName"),
        ("bad restart policy", pod({"restartPolicy": "UnknowPolicy"}), "spec.restartPolicy"),
        ("with hostNetwork hostPort not equal to containerPort", pod({"hostNetwork": True}, container={
            "ports": [{"hostPort": 8080, "containerPort": 2600, "protocol": "TCP"}]}), f"{C0}.ports[0].hostPort"),
        ("with hostAliases with invalid IP", pod({"hostNetwork": False, "hostAliases": [
            {"ip": "999.999.999.999", "hostnames": ["host1", "host2"]}]}), "spec.hostAliases[0].ip"),
        ("with hostAliases with invalid hostname", pod({"hostNetwork": False, "hostAliases": [
            {"ip": "12.34.56.78", "hostnames": ["@#$^#@#$"]}]}), "spec.hostAliases[0].hostnames[0]"),
        ("bad supplementalGroups large than math.MaxInt32", pod({"securityContext": {
            "supplementalGroups": [2**31, 1234]}}), "spec.securityContext.supplementalGroups[0]"),
        ("bad supplementalGroups less than 0", pod({"securityContext": {"supplementalGroups": [-1, 1234]}}),
         "spec.securityContext.supplementalGroups[0]"),
        ("bad runAsUser large than math.MaxInt32", pod({"securityContext": {"runAsUser": 2**31}}),
         "spec.securityContext.runAsUser"),
        ("bad runAsUser less than 0", pod({"securityContext": {"runAsUser": -1}}), "spec.securityContext.runAsUser"),
        ("bad fsGroup large than math.MaxInt32", pod({"securityContext": {"fsGroup": 2**31}}),
         "spec.securityContext.fsGroup"),
        ("bad fsGroup less than 0", pod({"securityContext": {"fsGroup": -1}}), "spec.securityContext.fsGroup"),
        ("bad-active-deadline-seconds", pod({"activeDeadlineSeconds": 0}), "spec.activeDeadlineSeconds"),
        ("active-deadline-seconds-too-large", pod({"activeDeadlineSeconds": 2**31}), "spec.activeDeadlineSeconds"),
        ("bad nodeName", pod({"nodeName": "node name"}), "spec.nodeName"),
        ("bad PriorityClassName", pod({"priorityClassName": "InvalidName"}), "spec.priorityClassName"),
        ("bad RuntimeClassName", pod({"runtimeClassName": "invalid/sandbox"}), "spec.runtimeClassName"),
        ("bad empty fsGroupchangepolicy", pod({"securityContext": {"fsGroupChangePolicy": ""}}),
         "spec.securityContext.fsGroupChangePolicy"),
        ("bad invalid fsgroupchangepolicy", pod({"securityContext": {"fsGroupChangePolicy": "invalid"}}),
         "spec.securityContext.fsGroupChangePolicy"),
    )],
    Case("TestValidatePodSpec", "ShareProcessNamespace and HostPID both set", pod(
        {"hostPID": True, "shareProcessNamespace": True}), "spec.shareProcessNamespace",
        note="the API server reports its internal path, spec.securityContext.shareProcessNamespace; kubetrain names "
             "the v1 field the user wrote"),
    # -- TestValidatePodDNSConfig and TestValidatePodReadinessGates
    *[Case("TestValidatePodDNSConfig", name, pod(spec), path) for name, spec, path in (
        ("valid: ipv6 nameserver", {"dnsConfig": {"nameservers": ["FE80::0202:B3FF:FE1E:8329"]}}, None),
        ("invalid: 4 nameservers", {"dnsConfig": {"nameservers": ["127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"]}},
         "spec.dnsConfig.nameservers"),
        ("valid: 7 search paths", {"dnsConfig": {"searches": [
            "custom", "mydomain.com", "local", "cluster.local", "svc.cluster.local", "default.svc.cluster.local",
            "exceeded"]}}, None),
        ("invalid: 33 search paths", {"dnsConfig": {"searches": [
            "custom", "mydomain.com", "local", "cluster.local", "svc.cluster.local", "default.svc.cluster.local.",
            *[str(n) for n in range(7, 34)]]}}, "spec.dnsConfig.searches"),
        ("invalid search path", {"dnsConfig": {"searches": ["custom?"]}}, "spec.dnsConfig.searches[0]"),
        ("invalid nameserver", {"dnsConfig": {"nameservers": ["invalid"]}}, "spec.dnsConfig.nameservers[0]"),
        ("invalid empty option name", {"dnsConfig": {"options": [{"value": "B"}]}}, "spec.dnsConfig.options[0]"),
        ("invalid: DNSNone with 0 nameserver", {"dnsPolicy": "None", "dnsConfig": {"searches": ["custom"]}},
         "spec.dnsConfig.nameservers"),
    )],
    Case("TestValidatePodReadinessGates", "two readiness gates", pod({"readinessGates": [
        {"conditionType": "example.com/condition1"}, {"conditionType": "example.com/condition2"}]}), None),
    Case("TestValidatePodReadinessGates", "invalid condition type", pod({"readinessGates": [
        {"conditionType": "invalid/condition/type"}]}), "spec.readinessGates[0].conditionType"),
    # -- TestValidateHandler (as a readiness probe's handler)
    *[Case("TestValidateHandler", f"successCases[{i}]", probe(handler), None) for i, handler in enumerate([
        {"exec": {"command": ["echo"]}},
        http_get(path="/", port=1, host="", scheme="HTTP"),
        http_get(path="/foo", port=65535, host="host", scheme="HTTP"),
        http_get(path="/", port="port", host="", scheme="HTTP"),
        http_get(path="/", port="port", host="", scheme="HTTP", httpHeaders=[{"name": "Host",
                                                                            "value": "foo.example.com"}]),
        http_get(path="/", port="port", host="", scheme="HTTP", httpHeaders=[
            {"name": "X-Forwarded-For", "value": "1.2.3.4"}, {"name": "X-Forwarded-For", "value": "5.6.7.8"}])])],
    Case("TestValidateHandler", "errorCases[0]", probe({}), f"{C0}.readinessProbe"),
    Case("TestValidateHandler", "errorCases[1]", probe({"exec": {"command": []}}), f"{C0}.readinessProbe.exec.command"),
    Case("TestValidateHandler", "errorCases[2]", probe(http_get(path="", port=0, host="")),
        f"{C0}.readinessProbe.httpGet.port"),
    Case("TestValidateHandler", "errorCases[3]", probe(http_get(path="/foo", port=65536, host="host")),
        f"{C0}.readinessProbe.httpGet.port"),
    Case("TestValidateHandler", "errorCases[4]", probe(http_get(path="", port="", host="")),
        f"{C0}.readinessProbe.httpGet.port"),
    Case("TestValidateHandler", "errorCases[5]", probe(http_get(
        path="/", port="port", host="", scheme="HTTP", httpHeaders=[{"name": "Host:", "value": "foo.example.com"}])),
        f"{C0}.readinessProbe.httpGet.httpHeaders[0].name"),
    Case("TestValidateHandler", "errorCases[6]", probe(http_get(
        path="/", port="port", host="", scheme="HTTP", httpHeaders=[{"name": "X_Forwarded_For",
                                                                     "value": "foo.example.com"}])),
        f"{C0}.readinessProbe.httpGet.httpHeaders[0].name"),
    # -- Test_validateProbe (as a liveness probe: a readiness probe takes no terminationGracePeriodSeconds)
    Case("Test_validateProbe", "tests[0] (no handler)", probe({}, "livenessProbe"), f"{C0}.livenessProbe"),
    Case("Test_validateProbe", "tests[1] (exec)", probe({"exec": {"command": ["echo"]}}, "livenessProbe"), None),
    *[Case("Test_validateProbe", f"tests[{i}] ({field} -1)", probe({"exec": {"command": ["echo"]}, field: -1},
                                                                   "livenessProbe"), f"{C0}.livenessProbe.{field}")
      for i, field in enumerate(("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                                 "failureThreshold", "terminationGracePeriodSeconds"), 2)],
    Case("Test_validateProbe", "tests[8] (terminationGracePeriodSeconds 0)", probe(
        {"exec": {"command": ["echo"]}, "terminationGracePeriodSeconds": 0}, "livenessProbe"),
        f"{C0}.livenessProbe.terminationGracePeriodSeconds"),
    Case("Test_validateProbe", "tests[9] (terminationGracePeriodSeconds 1)", probe(
        {"exec": {"command": ["echo"]}, "terminationGracePeriodSeconds": 1}, "livenessProbe"), None),
    # -- TestValidateCSIVolumeSource (an inline CSI volume of a pod)
    Case("TestValidateCSIVolumeSource", "all required fields ok", csi(driver="test-driver"), None),
    Case("TestValidateCSIVolumeSource", "missing driver name", csi(driver=""), "spec.volumes[0].csi.driver"),
    *[Case("TestValidateCSIVolumeSource", case, csi(driver=driver), None) for case, driver in (
        ("driver name: ok no punctuations", "comgooglestoragecsigcepd"),
        ("driver name: ok dot only", "io.kubernetes.storage.csi.flex"),
        ("driver name: ok dash only", "io-kubernetes-storage-csi-flex"),
        ("driver name: ok beginning with number", "2io.kubernetes.storage-csi.flex"),
        ("driver name: ok ending with number", "io.kubernetes.storage-csi.flex2"),
        ("driver name: ok length 1", "a"))],
    *[Case("TestValidateCSIVolumeSource", case, csi(driver=driver), "spec.volumes[0].csi.driver") for case, driver in (
        ("driver name: invalid underscore", "io_kubernetes_storage_csi_flex"),
        ("driver name: invalid dot underscores", "io.kubernetes.storage_csi.flex"),
        ("driver name: invalid dot dash underscores", "io.kubernetes-storage.csi_flex"),
        ("driver name: invalid length > 63", "g" * 65),
        ("driver name: invalid start char", "_comgooglestoragecsigcepd"),
        ("driver name: invalid end char", "comgooglestoragecsigcepd/"),
        ("driver name: invalid separators", "com/google/storage/csi~gcepd"))],
    Case("TestValidateCSIVolumeSource", "valid nodePublishSecretRef", csi(
        driver="com.google.gcepd", nodePublishSecretRef={"name": "foobar"}), None),
    Case("TestValidateCSIVolumeSource", "nodePublishSecretRef: invalid name missing", csi(
        driver="com.google.gcepd", nodePublishSecretRef={"name": ""}), "spec.volumes[0].csi.nodePublishSecretRef.name"),
    # -- TestValidateVolumes: configMap and downwardAPI sources
    Case("TestValidateVolumes", "valid ConfigMap with subdir projection", volume(
        {"configMap": {"name": "my-cfgmap", "items": [{"key": "key", "path": "dir/filename"}]}}, name="cfgmap"), None),
    Case("TestValidateVolumes", "configmap with missing path", config_map_volume(items=[{"key": "key", "path": ""}]),
        "spec.volumes[0].configMap.items[0].path"),
    Case("TestValidateVolumes", "configmap with leading ..", config_map_volume(items=[{"key": "key",
                                                                                     "path": "../foo"}]),
        "spec.volumes[0].configMap.items[0].path"),
    Case("TestValidateVolumes", "configmap with .. inside", config_map_volume(items=[{"key": "key",
                                                                                    "path": "foo/../bar"}]),
        "spec.volumes[0].configMap.items[0].path"),
    Case("TestValidateVolumes", "configmap with invalid positive defaultMode", config_map_volume(defaultMode=0o1000),
        "spec.volumes[0].configMap.defaultMode"),
    Case("TestValidateVolumes", "configmap with invalid negative defaultMode", config_map_volume(defaultMode=-1),
        "spec.volumes[0].configMap.defaultMode"),
    Case("TestValidateVolumes", "valid DownwardAPI", downward(
        labels_file("labels"),
        {"path": "labels with subscript", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['key']"}},
        {"path": "annotations with complex subscript", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.annotations['TEST.EXAMPLE.COM/key']"}},
        {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
        labels_file("path/with/embedded..dotdot"), labels_file("path/with/leading/..dotdot"),
        {"path": "cpu_limit", "resourceFieldRef": {"containerName": "test-container", "resource": "limits.cpu"}},
        {"path": "memory_request", "resourceFieldRef": {"containerName": "test-container",
                                                        "resource": "requests.memory"}}), None),
    Case("TestValidateVolumes", "hugepages-downwardAPI-enabled", downward(
        {"path": "hugepages_request", "resourceFieldRef": {"containerName": "test-container",
                                                           "resource": "requests.hugepages-2Mi"}},
        {"path": "hugepages_limit", "resourceFieldRef": {"containerName": "test-container",
                                                         "resource": "limits.hugepages-2Mi"}}), None),
    Case("TestValidateVolumes", "downapi valid defaultMode", downward(defaultMode=0o644), None),
    Case("TestValidateVolumes", "downapi invalid positive item mode", downward(labels_file("path", mode=0o1000)),
        "spec.volumes[0].downwardAPI.items[0].mode"),
    Case("TestValidateVolumes", "downapi invalid negative item mode", downward(labels_file("path", mode=-1)),
        "spec.volumes[0].downwardAPI.items[0].mode"),
    Case("TestValidateVolumes", "downapi empty metatada path", downward(labels_file("")),
        "spec.volumes[0].downwardAPI.items[0].path"),
    Case("TestValidateVolumes", "downapi absolute path", downward(labels_file("/absolutepath")),
        "spec.volumes[0].downwardAPI.items[0].path"),
    Case("TestValidateVolumes", "downapi dot dot path", downward(labels_file("../../passwd")),
        "spec.volumes[0].downwardAPI.items[0].path"),
    Case("TestValidateVolumes", "downapi dot dot file name", downward(labels_file("..badFileName")),
        "spec.volumes[0].downwardAPI.items[0].path"),
    Case("TestValidateVolumes", "downapi dot dot first level dirent",
         downward(labels_file("..badDirName/goodFileName")),
        "spec.volumes[0].downwardAPI.items[0].path"),
    Case("TestValidateVolumes", "downapi fieldRef and ResourceFieldRef together", downward(
        {**labels_file("test"),
         "resourceFieldRef": {"containerName": "test-container", "resource": "requests.memory"}}),
        "spec.volumes[0].downwardAPI.items[0]"),
    Case("TestValidateVolumes", "downapi invalid positive defaultMode", downward(defaultMode=0o1000),
        "spec.volumes[0].downwardAPI.defaultMode"),
    Case("TestValidateVolumes", "no volume source", volume({}, name="volume"), "spec.volumes[0]"),
    Case("TestValidateVolumes", "image volume with wrong pullPolicy", volume(
        {"image": {"reference": "quay.io/my/artifact:v1", "pullPolicy": "wrong"}}, name="image-volume"),
        "spec.volumes[0].image.pullPolicy"),
    # -- TestValidateEnv (Kubernetes 1.31: before relaxed names) and TestRelaxedValidateEnv (1.33)
    Case("TestValidateEnv", "successCase (a subset)", env(
        {"name": "abc", "value": "value"}, {"name": "AbC_123", "value": "value"}, {"name": "a.b.c", "value": "value"},
        {"name": "a-b-c", "value": "value"}, field_env("metadata.annotations['key']"),
        field_env("metadata.labels['key']"), field_env("spec.serviceAccountName"), field_env("status.podIPs"),
        {"name": "secret_value", "valueFrom": {"secretKeyRef": {"name": "some-secret", "key": "secret-key"}}},
        {"name": "ENV_VAR_1", "valueFrom": {"configMapKeyRef": {"name": "some-config-map", "key": "some-key"}}}),
        None),
    *[Case("TestValidateEnv", f"updateErrorCase: {case}", env({"name": name, "value": "value"}),
          f"{C0}.env[0].name", version="1.31")
      for case, name in (("invalid name a", "!\"#$%&'()"), ("invalid name b", "* +,-./0123456789"),
                         ("invalid name c", ":;<>?@"), ("invalid name d", "[\\]^_{}|~"))],
    Case("TestRelaxedValidateEnv", "successCase", env(*[{"name": name, "value": "value"} for name in (
        "!\"#$%&'()", "* +,-./0123456789", ":;<>?@", "[\\]^_`{}|~")]), None),
    Case("TestRelaxedValidateEnv", "illegal character", env({"name": "=abc"}), f"{C0}.env[0].name"),
    Case("TestValidateEnv", "zero-length name", env({"name": ""}), f"{C0}.env[0].name"),
    Case("TestValidateEnv", "value and valueFrom specified", env(
        {**field_env("metadata.name"), "value": "foo"}), f"{C0}.env[0].valueFrom"),
    Case("TestValidateEnv", "valueFrom without a source", env({"name": "abc", "valueFrom": {}}),
        f"{C0}.env[0].valueFrom"),
    Case("TestValidateEnv", "valueFrom.fieldRef and valueFrom.secretKeyRef specified", env(
        {"name": "abc", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"},
                                      "secretKeyRef": {"name": "a-secret", "key": "a-key"}}}),
        f"{C0}.env[0].valueFrom"),
    Case("TestValidateEnv", "valueFrom.secretKeyRef.name invalid", env(
        {"name": "abc", "valueFrom": {"secretKeyRef": {"name": "$%^&*#", "key": "a-key"}}}),
        f"{C0}.env[0].valueFrom.secretKeyRef.name"),
    Case("TestValidateEnv", "valueFrom.configMapKeyRef.name invalid", env(
        {"name": "abc", "valueFrom": {"configMapKeyRef": {"name": "$%^&*#", "key": "some-key"}}}),
        f"{C0}.env[0].valueFrom.configMapKeyRef.name"),
    Case("TestValidateEnv", "missing FieldPath on ObjectFieldSelector", env(
        {"name": "abc", "valueFrom": {"fieldRef": {"apiVersion": "v1"}}}), f"{C0}.env[0].valueFrom.fieldRef.fieldPath"),
    Case("TestValidateEnv", "invalid fieldPath", env(field_env("metadata.whoops")),
        f"{C0}.env[0].valueFrom.fieldRef.fieldPath"),
    Case("TestValidateEnv", "metadata.name with subscript", env(field_env("metadata.name['key']", "labels")),
        f"{C0}.env[0].valueFrom.fieldRef.fieldPath"),
    Case("TestValidateEnv", "metadata.labels without subscript", env(field_env("metadata.labels", "labels")),
        f"{C0}.env[0].valueFrom.fieldRef.fieldPath"),
    Case("TestValidateEnv", "metadata.annotations with invalid key",
         env(field_env("metadata.annotations['invalid~key']")),
        f"{C0}.env[0].valueFrom.fieldRef"),
    Case("TestValidateEnv", "metadata.labels with invalid key", env(field_env("metadata.labels['Www.k8s.io/test']")),
        f"{C0}.env[0].valueFrom.fieldRef"),
    Case("TestValidateEnv", "unsupported fieldPath", env(field_env("status.phase")),
        f"{C0}.env[0].valueFrom.fieldRef.fieldPath"),
    Case("TestLocalStorageEnvWithFeatureGate", "ephemeral-storage-limits", env(
        {"name": "ephemeral-storage-limits", "valueFrom": {"resourceFieldRef": {
            "containerName": "ctr", "resource": "limits.ephemeral-storage"}}}), None),
    Case("TestHugePagesEnv", "hugepages-requests", env(
        {"name": "hugepages-requests", "valueFrom": {"resourceFieldRef": {
            "containerName": "ctr", "resource": "requests.hugepages-2Mi"}}}), None,
        note="the upstream case names container test-container; a pod's env can only name one of its containers"),
    # -- TestValidateEnvFrom
    Case("TestValidateEnvFrom", "successCase", env_from(
        {"configMapRef": {"name": "abc"}}, {"prefix": "pre_", "configMapRef": {"name": "abc"}},
        {"prefix": "a.b", "secretRef": {"name": "abc"}}), None),
    Case("TestValidateEnvFrom", "zero-length name (configMapRef)", env_from({"configMapRef": {"name": ""}}),
        f"{C0}.envFrom[0].configMapRef.name"),
    Case("TestValidateEnvFrom", "invalid name (configMapRef)", env_from({"configMapRef": {"name": "$"}}),
        f"{C0}.envFrom[0].configMapRef.name"),
    Case("TestValidateEnvFrom", "zero-length name (secretRef)", env_from({"secretRef": {"name": ""}}),
        f"{C0}.envFrom[0].secretRef.name"),
    Case("TestValidateEnvFrom", "no refs", env_from({}), f"{C0}.envFrom[0]"),
    Case("TestValidateEnvFrom", "multiple refs",
         env_from({"secretRef": {"name": "abc"}, "configMapRef": {"name": "abc"}}),
        f"{C0}.envFrom[0]"),
    Case("TestValidateEnvFrom", "invalid secret ref name", env_from({"secretRef": {"name": "$%^&*#"}}),
        f"{C0}.envFrom[0].secretRef.name"),
    # -- TestValidateDockerConfigSecret, TestValidateBasicAuthSecret, TestValidateSSHAuthSecret, TestValidateSecret
    Case("TestValidateDockerConfigSecret", "valid dockercfg", secret("kubernetes.io/dockercfg",
                                                                    {".dockercfg": DOCKERCFG}), None),
    Case("TestValidateDockerConfigSecret", "missing dockercfg", secret("kubernetes.io/dockercfg", {}),
        "data[.dockercfg]"),
    Case("TestValidateDockerConfigSecret", "empty dockercfg", secret("kubernetes.io/dockercfg", {".dockercfg": b""}),
        "data[.dockercfg]"),
    Case("TestValidateDockerConfigSecret", "invalid dockercfg", secret("kubernetes.io/dockercfg",
                                                                      {".dockercfg": b"bad"}), "data[.dockercfg]"),
    Case("TestValidateDockerConfigSecret", "valid config.json", secret(
        "kubernetes.io/dockerconfigjson", {".dockerconfigjson": DOCKER_CONFIG_JSON}), None),
    Case("TestValidateDockerConfigSecret", "missing config.json", secret("kubernetes.io/dockerconfigjson", {}),
        "data[.dockerconfigjson]"),
    Case("TestValidateDockerConfigSecret", "empty config.json", secret("kubernetes.io/dockerconfigjson",
                                                                      {".dockerconfigjson": b""}),
        "data[.dockerconfigjson]"),
    Case("TestValidateDockerConfigSecret", "invalid config.json", secret("kubernetes.io/dockerconfigjson",
                                                                        {".dockerconfigjson": b"bad"}),
        "data[.dockerconfigjson]"),
    Case("TestValidateBasicAuthSecret", "valid", secret("kubernetes.io/basic-auth",
                                                       {"username": b"username", "password": b"password"}), None),
    Case("TestValidateBasicAuthSecret", "missing username and password", secret("kubernetes.io/basic-auth", {}),
        "data[username]"),
    Case("TestValidateSSHAuthSecret", "valid", secret("kubernetes.io/ssh-auth", {"ssh-privatekey": b"foo-bar-baz"}),
        None),
    Case("TestValidateSSHAuthSecret", "missing private key", secret("kubernetes.io/ssh-auth", {}),
        "data[ssh-privatekey]"),
    Case("TestValidateSecret", "valid service-account-token secret", secret(SA, {}, {SA_NAME: "foo"}), None),
    Case("TestValidateSecret", "empty service-account-token annotation", secret(SA, {}, {SA_NAME: ""}),
        f"metadata.annotations[{SA_NAME}]"),
    Case("TestValidateSecret", "missing service-account-token annotation", secret(
        SA, {}, {"kubernetes.io/service-account.uid": "foo"}), f"metadata.annotations[{SA_NAME}]"),
    Case("TestValidateSecret", "missing service-account-token annotations", secret(SA, {}),
        f"metadata.annotations[{SA_NAME}]"),
    Case("TestValidateSecret", "leading dot key", secret("Opaque", {".key": b"bar"}), None),
    Case("TestValidateSecret", "dot key", secret("Opaque", {".": b"bar"}), "data[.]"),
    Case("TestValidateSecret", "double dot key", secret("Opaque", {"..": b"bar"}), "data[..]"),
    # -- TestValidateServiceCreate and TestValidateServiceExternalTrafficPolicy
    *[Case("TestValidateServiceCreate", name, obj, path) for name, obj, path in (
        ("valid appProtocol", app_protocol("HTTP"), None),
        ("valid custom appProtocol", app_protocol("example.com/protocol"), None),
        ("invalid appProtocol", app_protocol("example.com/protocol_with{invalid}[characters]"),
         "spec.ports[0].appProtocol"),
        ("invalid cluster ip != clusterIP in multi ip service", service(
            ipFamilyPolicy="RequireDualStack", clusterIP="10.0.0.10", clusterIPs=["10.0.0.1", "2001::1"]),
         "spec.clusterIPs"),
        ("invalid cluster ip != clusterIP in single ip service", service(
            clusterIP="10.0.0.10", clusterIPs=["10.0.0.1"]), "spec.clusterIPs"),
        ("Use AllocateLoadBalancerNodePorts when type is not LoadBalancer", service(
            allocateLoadBalancerNodePorts=True), "spec.allocateLoadBalancerNodePorts"),
        ("valid LoadBalancerClass when type is LoadBalancer", service(
            **LOAD_BALANCER, loadBalancerClass="test.com/test-load-balancer-class"), None),
        ("invalid LoadBalancerClass", service(**LOAD_BALANCER, loadBalancerClass="Bad/LoadBalancerClass"),
         "spec.loadBalancerClass"),
        ("invalid: set LoadBalancerClass when type is not LoadBalancer", service(
            loadBalancerClass="test.com/test-load-balancer-class"), "spec.loadBalancerClass"),
        ("valid: trafficDistribution field set to PreferClose", service(trafficDistribution="PreferClose"), None),
        ("invalid: trafficDistribution field set to Random", service(trafficDistribution="Random"),
         "spec.trafficDistribution"),
    )],
    *[Case("TestValidateServiceExternalTrafficPolicy", name, obj, path) for name, obj, path in (
        ("valid loadBalancer service with externalTrafficPolicy and healthCheckNodePort set", service(
            type="LoadBalancer", allocateLoadBalancerNodePorts=True, externalTrafficPolicy="Local",
            healthCheckNodePort=34567), None),
        ("valid nodePort service with externalTrafficPolicy set", service(type="NodePort",
                                                                          externalTrafficPolicy="Local"), None),
        ("valid clusterIP service with none of externalTrafficPolicy and healthCheckNodePort set", service(), None),
        ("cannot set healthCheckNodePort field on loadBalancer service with externalTrafficPolicy!=Local", service(
            **LOAD_BALANCER, healthCheckNodePort=34567), "spec.healthCheckNodePort"),
        ("cannot set healthCheckNodePort field on nodePort service", service(
            type="NodePort", externalTrafficPolicy="Local", healthCheckNodePort=34567), "spec.healthCheckNodePort"),
        ("cannot set externalTrafficPolicy or healthCheckNodePort fields on clusterIP service", service(
            externalTrafficPolicy="Local", healthCheckNodePort=34567), "spec.externalTrafficPolicy"),
        ("cannot set externalTrafficPolicy field on ExternalName service", service(
            type="ExternalName", externalName="example.com", ports=[], selector={}, internalTrafficPolicy=None,
            externalTrafficPolicy="Local"), "spec.externalTrafficPolicy"),
    )],
    *[Case("TestValidateServiceExternalTrafficPolicy", name, obj, None,
           note="defaulting: the test validates the internal Service as written; the API server first defaults "
                "externalTrafficPolicy to Cluster on an externally reachable v1 Service") for name, obj in (
        ("externalTrafficPolicy is required on NodePort service", service(type="NodePort")),
        ("externalTrafficPolicy is required on LoadBalancer service", service(type="LoadBalancer")),
    )],
    # -- TestValidateConfigMap
    Case("TestValidateConfigMap", "valid", config_map({"key": "value"}, {"bin": b"value"}), None),
    Case("TestValidateConfigMap", "max key length", config_map({"a" * 253: "value"}), None),
    Case("TestValidateConfigMap", "leading dot key", config_map({".ab": "value"}), None),
    Case("TestValidateConfigMap", "invalid name", config_map(name="NoUppercaseOrSpecialCharsLike=Equals"),
        "metadata.name"),
    Case("TestValidateConfigMap", "invalid key", config_map({"a*b": "value"}), "data[a*b]"),
    Case("TestValidateConfigMap", "dot key", config_map({".": "value"}), "data[.]"),
    Case("TestValidateConfigMap", "double dot key", config_map({"..": "value"}), "data[..]"),
    Case("TestValidateConfigMap", "over max key length", config_map({"a" * 254: "value"}), f"data[{'a' * 254}]"),
    Case("TestValidateConfigMap", "over max size", config_map({"key": "a" * (1024 * 1024 + 1)}), "data"),
    Case("TestValidateConfigMap", "duplicated key", config_map({"key": "value1"}, {"key": b"value2"}),
        "binaryData[key]"),
    Case("TestValidateConfigMap", "binary data invalid key", config_map(binary={"a*b": b"value"}), "binaryData[a*b]"),
    Case("TestValidateConfigMap", "binary data non utf-8 bytes", config_map(binary={"key": bytes([0, 0xFE, 0, 0xFF])}),
        None),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_core_validation_case(row: Row):
    check(row)


def test_every_row_cites_its_upstream_test_once():
    assert len({row.id for row in ROWS}) == len(ROWS)
    assert {row.source for row in ROWS} == {"kubernetes/kubernetes@b1ce15c54586 pkg/apis/core/validation/validation_test.go"}
