"""Built-in objects without pods: Service, ConfigMap, Secret, Namespace, ServiceAccount, PersistentVolume(Claim),
StorageClass, PriorityClass.

Sources: Kubernetes 1.33 pkg/apis/core/validation/validation.go (ValidateService, ValidateConfigMap,
ValidateSecret, ValidateNamespace, ValidatePersistentVolume, ValidatePersistentVolumeClaim),
pkg/apis/storage/validation/validation.go (ValidateStorageClass), pkg/apis/scheduling/validation
(ValidatePriorityClass). Defaults applied before validation (a Service's type ClusterIP, protocol TCP,
targetPort = port) are applied here too.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from kubetrain.apiserver.apiserver_rules import DATA, SCHEDULING, SERVICE, STORAGE, TYPED_SECRET
from kubetrain.apiserver.claims import validate_access_modes, validate_claim_spec
from kubetrain.apiserver.meta import validate_labels, validate_object_meta
from kubetrain.apiserver.pod_scheduling import node_selector_term
from kubetrain.apiserver.pods import _csi_driver, _port_ref, quantity
from kubetrain.apiserver.report import Report
from kubetrain.model.created import Created
from kubetrain.model.names import (
    config_map_key_problem,
    dns_1035_label_problem,
    dns_1123_label_problem,
    dns_1123_subdomain_problem,
    qualified_name_problem,
)

DATA_LIMIT = 1024 * 1024  # core.MaxSecretSize: ConfigMap and Secret data
_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PV_SOURCES = frozenset((
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd", "quobyte",
    "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume", "photonPersistentDisk",
    "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi"))
HIGHEST_USER_PRIORITY = 1_000_000_000
_SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}


def validate_service(service: Mapping[str, Any], report: Report) -> list[Created]:
    code = SERVICE.code
    validate_object_meta(service.get("metadata"), "Service", dns_1035_label_problem, report)
    spec = service.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    cluster_ip = spec.get("clusterIP") or ""
    cluster_ips = spec.get("clusterIPs") or ([cluster_ip] if cluster_ip else [])
    headless = cluster_ips == ["None"]
    ports = spec.get("ports") or ()
    if kind not in _SERVICE_TYPES:
        report.add(code, "spec.type", f"{kind!r}: supported values are {', '.join(_SERVICE_TYPES)}")
    if not ports and not headless and kind != "ExternalName":
        report.add(code, "spec.ports", "required: a Service needs ports unless it is headless (clusterIP: None)")
    if kind in ("LoadBalancer", "NodePort") and headless:
        report.add(code, "spec.clusterIP", f"may not be 'None' for {kind} services")
    if kind == "ExternalName":
        if cluster_ips:
            report.add(code, "spec.clusterIP", "may not be set for ExternalName services")
        name = (spec.get("externalName") or "").rstrip(".")
        problem = dns_1123_subdomain_problem(name) if name else "required"
        if problem:
            report.add(code, "spec.externalName", problem)
    elif cluster_ip and cluster_ips and cluster_ips[0] != cluster_ip:
        report.add(code, "spec.clusterIPs", "the first value must match clusterIP")
    for i, ip in enumerate(cluster_ips if kind != "ExternalName" else ()):
        if ip == "None":
            if i or len(cluster_ips) > 1:
                report.add(code, "spec.clusterIPs", "'None' must be the first and only value")
        elif _ip(ip) is None:
            report.add(code, f"spec.clusterIPs[{i}]", f"{ip!r} is not a valid IP address")
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    node_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        where = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            report.add(code, f"{where}.name", "required: every port of a Service with more than one port needs a name")
        elif name:
            problem = dns_1123_label_problem(name)
            if problem:
                report.add(code, f"{where}.name", problem)
            elif name in names:
                report.add(code, f"{where}.name", f"Duplicate value: {name!r}")
            names.add(name)
        number, protocol = port.get("port"), port.get("protocol", "TCP")
        if not (isinstance(number, int) and 1 <= number <= 65535):
            report.add(code, f"{where}.port", f"{number!r} must be between 1 and 65535")
        if protocol not in ("TCP", "UDP", "SCTP"):
            report.add(code, f"{where}.protocol", f"{protocol!r}: supported values are TCP, UDP, SCTP")
        if port.get("targetPort") is not None:
            _port_ref(port["targetPort"], f"{where}.targetPort", report, code)
        if port.get("appProtocol") is not None:
            problem = qualified_name_problem(port["appProtocol"])
            if problem:
                report.add(code, f"{where}.appProtocol", problem)
        if (protocol, number) in seen:
            report.add(code, where, f"Duplicate value: port {number}/{protocol}")
        seen.add((protocol, number))
        node_port = port.get("nodePort")
        if node_port:
            if kind == "ClusterIP":
                report.add(code, f"{where}.nodePort", "may not be used when type is ClusterIP")
            if (protocol, node_port) in node_ports:
                report.add(code, f"{where}.nodePort", f"Duplicate value: {node_port}")
            node_ports.add((protocol, node_port))
    if spec.get("selector"):
        validate_labels(spec["selector"], "spec.selector", report, code)
    affinity = spec.get("sessionAffinity", "None")
    if affinity not in ("None", "ClientIP"):
        report.add(code, "spec.sessionAffinity", f"{affinity!r}: supported values are ClientIP, None")
    elif affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        report.add(code, "spec.sessionAffinityConfig", "must not be set when sessionAffinity is None")
    elif affinity == "ClientIP":
        timeout = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds", 10800)
        if not 0 < timeout <= 86400:
            report.add(code, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "must be between 1 and 86400")
    for i, ip in enumerate(spec.get("externalIPs") or ()):
        address = _ip(ip)
        if address is None:
            report.add(code, f"spec.externalIPs[{i}]", f"{ip!r} is not a valid IP address")
        elif address.is_unspecified or address.is_loopback or address.is_link_local:
            report.add(code, f"spec.externalIPs[{i}]", f"{ip!r} may not be unspecified, loopback or link-local")
    external = kind in ("NodePort", "LoadBalancer") or bool(spec.get("externalIPs"))
    policy = spec.get("externalTrafficPolicy")
    if policy is not None and not external:
        report.add(code, "spec.externalTrafficPolicy", "may only be set for externally-accessible services")
    elif policy is not None and policy not in ("Cluster", "Local"):
        report.add(code, "spec.externalTrafficPolicy", f"{policy!r}: supported values are Cluster, Local")
    internal = spec.get("internalTrafficPolicy")
    if internal is not None and internal not in ("Cluster", "Local"):
        report.add(code, "spec.internalTrafficPolicy", f"{internal!r}: supported values are Cluster, Local")
    for field in ("loadBalancerSourceRanges", "allocateLoadBalancerNodePorts", "loadBalancerClass"):
        if spec.get(field) is not None and kind != "LoadBalancer":
            report.add(code, f"spec.{field}", "may only be used when type is LoadBalancer")
    balancer_class = spec.get("loadBalancerClass")
    if isinstance(balancer_class, str) and qualified_name_problem(balancer_class):
        report.add(code, "spec.loadBalancerClass", qualified_name_problem(balancer_class))
    if spec.get("healthCheckNodePort") and not (kind == "LoadBalancer" and policy == "Local"):
        report.add(code, "spec.healthCheckNodePort", "may only be set when type is LoadBalancer and "
                   "externalTrafficPolicy is Local")
    for i, cidr in enumerate(spec.get("loadBalancerSourceRanges") or ()):
        try:
            ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:
            report.add(code, f"spec.loadBalancerSourceRanges[{i}]", f"{cidr!r} is not a valid CIDR")
    families = spec.get("ipFamilies") or ()
    for i, family in enumerate(families):
        if family not in ("IPv4", "IPv6"):
            report.add(code, f"spec.ipFamilies[{i}]", f"{family!r}: supported values are IPv4, IPv6")
        elif family in families[:i]:
            report.add(code, f"spec.ipFamilies[{i}]", f"Duplicate value: {family!r}")
    family_policy = spec.get("ipFamilyPolicy")
    if family_policy is not None and family_policy not in ("SingleStack", "PreferDualStack", "RequireDualStack"):
        report.add(code, "spec.ipFamilyPolicy", f"{family_policy!r}: supported values are SingleStack, "
                   "PreferDualStack, RequireDualStack")
    distribution = spec.get("trafficDistribution")
    if distribution is not None and distribution != "PreferClose":
        report.add(code, "spec.trafficDistribution", f"{distribution!r}: the supported value is PreferClose")
    return []


def _ip(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value)
    except (ValueError, TypeError):
        return None


def _data_keys(obj: Mapping[str, Any], report: Report, fields: tuple[str, ...]) -> None:
    keys: dict[str, str] = {}
    for field in fields:
        for key in obj.get(field) or {}:
            problem = config_map_key_problem(key)
            if problem:
                report.add(DATA.code, f"{field}[{key}]", problem)
            elif key in keys:
                report.add(DATA.code, f"{field}[{key}]", f"duplicate of the key in {keys[key]}")
            keys[key] = field


def validate_config_map(config_map: Mapping[str, Any], report: Report) -> list[Created]:
    validate_object_meta(config_map.get("metadata"), "ConfigMap", dns_1123_subdomain_problem, report)
    _data_keys(config_map, report, ("data", "binaryData"))
    size = sum(len(v.encode()) for v in (config_map.get("data") or {}).values() if isinstance(v, str))
    size += sum(_decoded_size(v) for v in (config_map.get("binaryData") or {}).values())
    if size > DATA_LIMIT:
        report.add(DATA.code, "data", f"the data totals {size} bytes; a ConfigMap holds at most {DATA_LIMIT} (1 MiB)")
    return []


def _decoded_size(value: Any) -> int:
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, TypeError, ValueError):
        return 0


def validate_secret(secret: Mapping[str, Any], report: Report) -> list[Created]:
    validate_object_meta(secret.get("metadata"), "Secret", dns_1123_subdomain_problem, report)
    _data_keys(secret, report, ("data", "stringData"))
    size = sum(_decoded_size(v) for v in (secret.get("data") or {}).values())
    size += sum(len(v.encode()) for v in (secret.get("stringData") or {}).values() if isinstance(v, str))
    if size > DATA_LIMIT:
        report.add(DATA.code, "data", f"the data totals {size} bytes; a Secret holds at most {DATA_LIMIT} (1 MiB)")
    _typed_secret(secret, report)
    return []


# ValidateSecret's types: the keys each needs in its data (stringData merged in).
_DOCKER_CONFIG = {"kubernetes.io/dockercfg": ".dockercfg", "kubernetes.io/dockerconfigjson": ".dockerconfigjson"}
_SERVICE_ACCOUNT_NAME = "kubernetes.io/service-account.name"


def _secret_value(secret: Mapping[str, Any], key: str) -> bytes | None:
    """The bytes of `key` as the API server holds them (stringData wins over data); None when absent; b"" when
    the data is not base64 (the schema check reports that)."""
    text = (secret.get("stringData") or {}).get(key)
    if isinstance(text, str):
        return text.encode()
    if key not in (secret.get("data") or {}):
        return None
    try:
        return base64.b64decode(secret["data"][key] or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        return b""


def _json_object_problem(content: bytes) -> str | None:
    """Go's json.Unmarshal into map[string]interface{}: a JSON object (or null), nothing else."""
    def refuse(constant: str) -> None:
        raise ValueError(f"invalid character {constant[0]!r} looking for beginning of value")
    try:
        value = json.loads(content.decode(), parse_constant=refuse)
    except UnicodeDecodeError:
        return "is not UTF-8 JSON"
    except ValueError as error:
        return f"is not JSON: {error}"
    if value is not None and not isinstance(value, dict):
        return f"is JSON but not an object (a {type(value).__name__})"
    return None


def _typed_secret(secret: Mapping[str, Any], report: Report) -> None:
    code = TYPED_SECRET.code
    kind = secret.get("type") or "Opaque"
    if kind == "kubernetes.io/service-account-token":
        if not ((secret.get("metadata") or {}).get("annotations") or {}).get(_SERVICE_ACCOUNT_NAME):
            report.add(code, f"metadata.annotations[{_SERVICE_ACCOUNT_NAME}]", "required: a service-account-token "
                       "Secret names its ServiceAccount")
    elif kind in _DOCKER_CONFIG:
        key = _DOCKER_CONFIG[kind]
        content = _secret_value(secret, key)
        if content is None:
            report.add(code, f"data[{key}]", f"required: a {kind} Secret holds the registry credentials in {key}")
        else:
            problem = _json_object_problem(content)
            if problem:
                report.add(code, f"data[{key}]", f"<secret contents redacted> {problem}: a {kind} Secret holds a JSON "
                           "object")
    elif kind == "kubernetes.io/basic-auth":
        if _secret_value(secret, "username") is None and _secret_value(secret, "password") is None:
            for key in ("username", "password"):
                report.add(code, f"data[{key}]", f"required: a {kind} Secret holds username or password (or both)")
    elif kind == "kubernetes.io/ssh-auth":
        if not _secret_value(secret, "ssh-privatekey"):
            report.add(code, "data[ssh-privatekey]", f"required: a {kind} Secret holds a non-empty ssh-privatekey")
    elif kind == "kubernetes.io/tls":
        for key in ("tls.crt", "tls.key"):
            if _secret_value(secret, key) is None:
                report.add(code, f"data[{key}]", f"required: a {kind} Secret holds tls.crt and tls.key")


def validate_namespace(namespace: Mapping[str, Any], report: Report) -> list[Created]:
    validate_object_meta(namespace.get("metadata"), "Namespace", dns_1123_label_problem, report, core_finalizers=True)
    for i, finalizer in enumerate((namespace.get("spec") or {}).get("finalizers") or ()):
        problem = qualified_name_problem(finalizer)
        if problem is None and "/" not in finalizer and finalizer != "kubernetes":
            problem = f"{finalizer!r} is neither a standard finalizer name nor fully qualified"
        if problem:
            report.add(SCHEDULING.code, f"spec.finalizers[{i}]", problem)
    return []


def validate_priority_class(priority_class: Mapping[str, Any], report: Report) -> list[Created]:
    meta = priority_class.get("metadata") or {}
    validate_object_meta(meta, "PriorityClass", dns_1123_subdomain_problem, report)
    name, value = meta.get("name") or "", priority_class.get("value")
    if name.startswith("system-"):
        if _SYSTEM_PRIORITY_CLASSES.get(name) != value:
            report.add(SCHEDULING.code, "metadata.name", "priority class names starting with 'system-' are reserved "
                       "for the system's own (system-node-critical, system-cluster-critical)")
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        report.add(SCHEDULING.code, "value", f"{value}: a user-defined priority is at most {HIGHEST_USER_PRIORITY}")
    policy = priority_class.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        report.add(SCHEDULING.code, "preemptionPolicy", f"{policy!r}: supported values are PreemptLowerPriority, Never")
    return []


def _class_name(spec: Mapping[str, Any], field: str, report: Report) -> None:
    name = spec.get(field)
    if name:
        problem = dns_1123_subdomain_problem(name)
        if problem:
            report.add(STORAGE.code, f"spec.{field}", problem)


def validate_persistent_volume(volume: Mapping[str, Any], report: Report) -> list[Created]:
    code = STORAGE.code
    validate_object_meta(volume.get("metadata"), "PersistentVolume", dns_1123_subdomain_problem, report)
    spec = volume.get("spec") or {}
    validate_access_modes(spec.get("accessModes"), "spec.accessModes", report, code)
    capacity = spec.get("capacity") or {}
    if set(capacity) != {"storage"}:
        report.add(code, "spec.capacity", "must hold exactly one quantity, storage")
    for name, value in capacity.items():
        amount = quantity(value)
        if amount is None or amount <= 0:
            report.add(code, f"spec.capacity[{name}]", f"{value!r} must be a quantity greater than zero")
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy is not None and policy not in ("Delete", "Recycle", "Retain"):
        report.add(code, "spec.persistentVolumeReclaimPolicy", f"{policy!r}: supported values are Delete, Recycle, "
                   "Retain")
    sources = [key for key in spec if key in _PV_SOURCES]
    if not sources:
        report.add(code, "spec", "must specify a volume type (csi, nfs, hostPath, ...)")
    for extra in sources[1:]:
        report.add(code, f"spec.{extra}", "may not specify more than 1 volume type")
    csi = spec.get("csi")
    if csi is not None:
        _csi_driver(csi.get("driver"), "spec.csi.driver", report, code)
        if not csi.get("volumeHandle"):
            report.add(code, "spec.csi.volumeHandle", "required")
    if spec.get("local") is not None and spec.get("nodeAffinity") is None:
        report.add(code, "spec.nodeAffinity", "required: a local volume needs node affinity")
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        terms = (affinity.get("required") or {}).get("nodeSelectorTerms")
        if affinity.get("required") is None:
            report.add(code, "spec.nodeAffinity.required", "must specify required node constraints")
        elif not terms:
            report.add(code, "spec.nodeAffinity.required.nodeSelectorTerms", "must have at least one term")
        for i, term in enumerate(terms or ()):
            node_selector_term(term, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]", report, required=True)
    _class_name(spec, "storageClassName", report)
    mode = spec.get("volumeMode")
    if mode is not None and mode not in ("Block", "Filesystem"):
        report.add(code, "spec.volumeMode", f"{mode!r}: supported values are Block, Filesystem")
    return []


def validate_persistent_volume_claim(claim: Mapping[str, Any], report: Report) -> list[Created]:
    code = STORAGE.code
    validate_object_meta(claim.get("metadata"), "PersistentVolumeClaim", dns_1123_subdomain_problem, report)
    spec = claim.get("spec") or {}
    validate_claim_spec(spec, "spec", report, code)
    return []


def validate_storage_class(storage_class: Mapping[str, Any], report: Report) -> list[Created]:
    code = STORAGE.code
    validate_object_meta(storage_class.get("metadata"), "StorageClass", dns_1123_subdomain_problem, report)
    provisioner = storage_class.get("provisioner") or ""
    problem = qualified_name_problem(provisioner.lower()) if provisioner else "required"
    if problem:
        report.add(code, "provisioner", problem)
    parameters = storage_class.get("parameters") or {}
    if len(parameters) > 512:
        report.add(code, "parameters", "must have at most 512 parameters")
    if sum(len(k) + len(v) for k, v in parameters.items() if isinstance(v, str)) > 256 * 1024:
        report.add(code, "parameters", "the parameters total more than 256 KiB")
    for key in parameters:
        if not key:
            report.add(code, "parameters", "a parameter name can not be empty")
    policy = storage_class.get("reclaimPolicy")
    if policy is not None and policy not in ("Delete", "Retain"):
        report.add(code, "reclaimPolicy", f"{policy!r}: supported values are Delete, Retain")
    mode = storage_class.get("volumeBindingMode")
    if mode is not None and mode not in ("Immediate", "WaitForFirstConsumer"):
        report.add(code, "volumeBindingMode", f"{mode!r}: supported values are Immediate, WaitForFirstConsumer")
    seen: list[Any] = []
    for i, term in enumerate(storage_class.get("allowedTopologies") or ()):
        keys: set[str] = set()
        for j, requirement in enumerate(term.get("matchLabelExpressions") or ()):
            where = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            key, values = requirement.get("key") or "", requirement.get("values") or []
            problem = qualified_name_problem(key)
            if problem:
                report.add(code, f"{where}.key", problem)
            if key in keys:
                report.add(code, f"{where}.key", f"Duplicate value: {key!r}")
            keys.add(key)
            if not values:
                report.add(code, f"{where}.values", "required")
            if len(set(values)) != len(values):
                report.add(code, f"{where}.values", "values must be unique")
        if term in seen:
            report.add(code, f"allowedTopologies[{i}]", "Duplicate value: the same topology term twice")
        seen.append(term)
    return []
