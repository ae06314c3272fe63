"""Pods as the API server validates them: the pod spec of a Pod, of a template, of what a controller creates.

Written after Kubernetes 1.33 pkg/apis/core/validation/validation.go (ValidatePodSpec and what it calls), for
the fields of the core/v1 PodSpec. `is_pod` marks a pod the API server is asked to create (not a template):
defaulting has run (protocol TCP; with hostNetwork, hostPort = containerPort), and the pod-only checks apply.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from kubetrain.apiserver.apiserver_rules import (
    AFFINITY,
    APPARMOR,
    CSI_SECRET,
    DIVISOR,
    ENVIRONMENT,
    EPHEMERAL_CLAIM,
    HTTP_HEADERS,
    METADATA,
    POD_FIELDS,
    PORTS,
    PROCESS_NAMESPACE,
    RESOURCES,
    VOLUMES,
)
from kubetrain.apiserver.claims import validate_claim_template
from kubetrain.apiserver.meta import validate_labels
from kubetrain.apiserver.pod_scheduling import validate_affinity, validate_tolerations, validate_topology_spread
from kubetrain.apiserver.report import Report, check_value, is_int
from kubetrain.model.names import (
    config_map_key_problem,
    dns_1123_label_problem,
    dns_1123_subdomain_problem,
    env_name_problem,
    port_name_problem,
    qualified_name_problem,
)
from kubetrain.model.quantity import exact_quantity, huge_pages_problem, parse_quantity
from kubetrain.model.vocabulary import DEFAULT_TERMINATION_GRACE_S

MAX_INT32 = 2**31 - 1
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_VOLUME_SOURCE_ORDER = (  # validateVolumeSource's order: the second one found is the one reported
    "emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs", "iscsi",
    "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte", "downwardAPI", "fc",
    "flexVolume", "configMap", "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume", "azureDisk",
    "storageos", "projected", "scaleIO", "csi", "ephemeral", "image")
_VOLUME_SOURCES = frozenset(_VOLUME_SOURCE_ORDER)
_HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
                    "BlockDevice")
_ENV_FIELD_PATHS = frozenset(("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                              "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
                              "status.podIPs"))
_VOLUME_FIELD_PATHS = frozenset(("metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations",
                                 "metadata.uid"))
_RESOURCE_FIELDS = frozenset(("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu",
                              "requests.memory", "requests.ephemeral-storage"))
_SUBSCRIPT = re.compile(r"^(metadata\.(?:labels|annotations))\['(.*)'\]$")
_STANDARD_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_FILE_MODE_MAX = 0o777
_HTTP_HEADER_NAME = re.compile(r"^[-A-Za-z0-9]+$")  # apimachinery IsHTTPHeaderName
_BYTE_DIVISORS = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
_DIVISORS = {"cpu": ("1m", "1"), "memory": _BYTE_DIVISORS, "ephemeral-storage": _BYTE_DIVISORS}
_APPARMOR_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_LOCALHOST_PROFILE_MAX = 4095  # PATH_MAX - 1


@lru_cache(maxsize=4096)
def quantity(text: str | float) -> Decimal | None:
    """A quantity's value, None when it is not one the API server takes (negative included)."""
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def _ip_problem(value: Any) -> str | None:
    try:
        ipaddress.ip_address(value)
    except (ValueError, TypeError):
        return f"{value!r} is not a valid IP address"
    return None


# -- the pod --------------------------------------------------------------------------------------------

def validate_pod_spec(spec: Mapping[str, Any], path: str, report: Report, *, is_pod: bool) -> None:
    """ValidatePodSpec (and, for a pod, what pod creation adds). The containers, volumes and host ports are
    checked together; every other field present is checked by its own function (`_POD_FIELDS`)."""
    volumes = _volumes(spec["volumes"], f"{path}.volumes", report) if "volumes" in spec else {}
    host_network = bool(spec.get("hostNetwork"))
    restart = spec.get("restartPolicy") or "Always"
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_S)
    containers = spec.get("containers") or ()
    init_containers = spec.get("initContainers") or ()
    if not containers:
        report.add(POD_FIELDS.code, f"{path}.containers", "required: a pod needs at least one container")
    names: set[str] = set()
    container_names = {c.get("name") for c in (*containers, *init_containers)}
    for kind, items in (("containers", containers), ("initContainers", init_containers)):
        for i, container in enumerate(items):
            where = f"{path}.{kind}[{i}]"
            _container(container, where, report, volumes, is_pod, restart, container_names)
            name = container.get("name")
            if name in names:
                report.add(POD_FIELDS.code, f"{where}.name", f"Duplicate value: {name!r} (container names are unique "
                           "across containers and initContainers)")
            names.add(name)
            if container.keys() & _LIFECYCLE_FIELDS:
                _lifecycle_rules(container, where, report, kind == "initContainers", grace)
            if kind == "initContainers":
                _host_ports([container], f"{path}.initContainers", report, host_network, is_pod, offset=i)
    _host_ports(containers, f"{path}.containers", report, host_network, is_pod)
    for field in spec.keys() & _POD_FIELDS.keys():
        _POD_FIELDS[field](spec[field], f"{path}.{field}", report, spec)


def _host_network(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    """validatePodHostNetworkDeps: on the host's network a container port is the host port."""
    if not value:
        return
    base = path[:-len(".hostNetwork")]
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or ()):
            for j, port in enumerate(container.get("ports") or ()):
                host, own = port.get("hostPort"), port.get("containerPort")
                if host and host != own:
                    report.add(PORTS.code, f"{base}.{kind}[{i}].ports[{j}].hostPort",
                               f"must match containerPort ({own}) when hostNetwork is true")


def _share_process_namespace(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    """ValidatePodSecurityContext: the containers share one process namespace, or use the node's."""
    if value and spec.get("hostPID"):
        report.add(PROCESS_NAMESPACE.code, path, "shareProcessNamespace and hostPID cannot both be enabled")


def _one_of(*allowed: str, code: str = POD_FIELDS.code):
    def check(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
        if value not in allowed:
            report.add(code, path, f"{value!r}: supported values are {', '.join(allowed)}")
    return check


def _named(problem, code: str = POD_FIELDS.code):
    def check(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
        if value:
            check_value(problem, value, path, report, code)
    return check


def _dns_policy(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    _one_of("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")(value, path, report, spec)
    if value == "None" and not (spec.get("dnsConfig") or {}).get("nameservers"):
        report.add(POD_FIELDS.code, f"{path[:-len('dnsPolicy')]}dnsConfig.nameservers", "must provide at least one "
                   "DNS nameserver when dnsPolicy is None")


def _node_selector(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    validate_labels(value or {}, path, report, AFFINITY.code)


def _readiness_gates(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    for i, gate in enumerate(value or ()):
        check_value(qualified_name_problem, gate.get("conditionType") or "", f"{path}[{i}].conditionType", report)


def _scheduling_gates(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    seen: set[str] = set()
    for i, gate in enumerate(value or ()):
        name = gate.get("name") or ""
        check_value(qualified_name_problem, name, f"{path}[{i}]", report)
        if name in seen:
            report.add(POD_FIELDS.code, f"{path}[{i}]", f"Duplicate value: {name!r}")
        seen.add(name)


def _deadline(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    if value is not None and not (1 <= value <= MAX_INT32):
        report.add(POD_FIELDS.code, path, f"{value} must be between 1 and {MAX_INT32}")


def _host_aliases(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    for i, alias in enumerate(value or ()):
        problem = _ip_problem(alias.get("ip"))
        if problem:
            report.add(POD_FIELDS.code, f"{path}[{i}].ip", problem)
        for j, hostname in enumerate(alias.get("hostnames") or ()):
            check_value(dns_1123_subdomain_problem, hostname, f"{path}[{i}].hostnames[{j}]", report)


def _os(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    if value is not None and (value or {}).get("name") not in ("linux", "windows"):
        report.add(POD_FIELDS.code, f"{path}.name", f"{(value or {}).get('name')!r}: supported values are linux, "
                   "windows")


def _ephemeral(value: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    if value:
        report.add(POD_FIELDS.code, path, "may not be set on create (only through the ephemeralcontainers "
                   "subresource)")


def validate_pod_annotations(annotations: Mapping[str, str], spec: Mapping[str, Any], report: Report) -> None:
    """ValidatePodSpecificAnnotations: the deletion cost is an int32, AppArmor annotations name containers."""
    prefix = _APPARMOR_PREFIX
    if "controller.kubernetes.io/pod-deletion-cost" not in annotations and not any(
            key.startswith(prefix) for key in annotations):
        return
    containers = {c.get("name") for kind in ("containers", "initContainers") for c in spec.get(kind) or ()}
    cost = annotations.get("controller.kubernetes.io/pod-deletion-cost")
    if cost is not None:
        try:
            valid = -2**31 <= int(cost) <= MAX_INT32 and str(int(cost)) == cost.strip()
        except (TypeError, ValueError):
            valid = False
        if not valid:
            report.add(METADATA.code, "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]",
                       f"{cost!r} must be a 32-bit integer")
    for key, value in annotations.items():
        if key.startswith(prefix):
            if key[len(prefix):] not in containers:
                report.add(METADATA.code, f"metadata.annotations[{key}]", "names no container of the pod")
            if value not in ("", "runtime/default", "unconfined") and not value.startswith("localhost/"):
                report.add(METADATA.code, f"metadata.annotations[{key}]", f"{value!r} is not an AppArmor profile")
            elif value.startswith("localhost/") and not value[len("localhost/"):].strip():
                report.add(APPARMOR.code, f"metadata.annotations[{key}]", f"{value!r} names no profile: the kubelet "
                           "refuses a Localhost profile without its name (localhost/<profile>)")
    _app_armor_annotations_match(annotations, spec, report)


_APPARMOR_ANNOTATION_VALUES = {"Unconfined": "unconfined", "RuntimeDefault": "runtime/default"}


def _app_armor_annotations_match(annotations: Mapping[str, str], spec: Mapping[str, Any], report: Report) -> None:
    """validateAppArmorAnnotationsAndFieldsMatchOnCreate: a container's AppArmor annotation and its field (or the
    pod's) say the same."""
    if (spec.get("os") or {}).get("name") == "windows":
        return
    pod_profile = (spec.get("securityContext") or {}).get("appArmorProfile")
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or ()):
            profile = (container.get("securityContext") or {}).get("appArmorProfile") or pod_profile
            annotation = annotations.get(f"{_APPARMOR_PREFIX}{container.get('name')}")
            if not profile or annotation is None:
                continue
            where = f"spec.{kind}[{i}].securityContext.appArmorProfile"
            kind_of = profile.get("type")
            if kind_of in _APPARMOR_ANNOTATION_VALUES and annotation != _APPARMOR_ANNOTATION_VALUES[kind_of] or \
                    kind_of == "Localhost" and not annotation.startswith("localhost/"):
                report.add(APPARMOR.code, f"{where}.type", f"the AppArmor type in the annotation ({annotation!r}) and "
                           f"the field ({kind_of}) must match")
            elif kind_of == "Localhost" and annotation[len("localhost/"):] != profile.get("localhostProfile"):
                report.add(APPARMOR.code, f"{where}.localhostProfile", f"the AppArmor profile in the annotation "
                           f"({annotation!r}) and the field ({profile.get('localhostProfile')!r}) must match")


# -- volumes and mounts ---------------------------------------------------------------------------------

def _volumes(volumes: Any, path: str, report: Report) -> dict[str, Mapping[str, Any]]:
    """ValidateVolumes: the volumes by name (mounts are checked against these)."""
    valid: dict[str, Mapping[str, Any]] = {}
    for i, volume in enumerate(volumes):
        name = volume.get("name")
        problem = (dns_1123_label_problem(name) if isinstance(name, str) else "must be a string") if name else \
            "required"
        if problem:
            report.add(VOLUMES.code, f"{path}[{i}].name", problem)
        elif name in valid:
            report.add(VOLUMES.code, f"{path}[{i}].name", f"Duplicate value: {name!r} (volume names are unique)")
        sources = volume.keys() & _VOLUME_SOURCES
        if len(sources) == 1:
            (source,) = sources
            _volume_source(source, volume[source] or {}, f"{path}[{i}].{source}", report)
        elif not sources:
            report.add(VOLUMES.code, f"{path}[{i}]", "must specify a volume type (emptyDir, configMap, "
                       "persistentVolumeClaim, ...)")
        else:
            listed = [key for key in _VOLUME_SOURCE_ORDER if key in sources]
            for source in listed[1:]:
                report.add(VOLUMES.code, f"{path}[{i}].{source}", f"may not specify more than 1 volume type (it has "
                           f"{', '.join(listed)})")
        if name:  # a volume even when invalid: its mounts are not reported a second time
            valid.setdefault(name, volume)
    return valid


def _volume_source(kind: str, source: Mapping[str, Any], path: str, report: Report) -> None:
    code = VOLUMES.code
    if kind == "emptyDir":
        size = source.get("sizeLimit")
        if size is not None and quantity(size) is None:
            report.add(code, f"{path}.sizeLimit", f"{size!r} is not a non-negative quantity")
    elif kind in ("configMap", "secret"):
        name_field = "name" if kind == "configMap" else "secretName"
        if not source.get(name_field):
            report.add(code, f"{path}.{name_field}", "required")
        _mode(source.get("defaultMode"), f"{path}.defaultMode", report)
        _key_paths(source.get("items") or (), f"{path}.items", report)
    elif kind == "persistentVolumeClaim":
        if not source.get("claimName"):
            report.add(code, f"{path}.claimName", "required")
    elif kind == "hostPath":
        host = source.get("path")
        if not host:
            report.add(code, f"{path}.path", "required")
        elif ".." in host.split("/"):
            report.add(code, f"{path}.path", "must not contain '..'")
        if source.get("type", "") not in _HOST_PATH_TYPES:
            report.add(code, f"{path}.type", f"{source.get('type')!r}: supported values are "
                       f"{', '.join(t for t in _HOST_PATH_TYPES if t)}")
    elif kind == "nfs":
        if not source.get("server"):
            report.add(code, f"{path}.server", "required")
        if not str(source.get("path") or "").startswith("/"):
            report.add(code, f"{path}.path", "must be an absolute path")
    elif kind == "csi":
        _csi_driver(source.get("driver"), f"{path}.driver", report, code)
        secret = source.get("nodePublishSecretRef")
        if secret is not None:
            name = (secret or {}).get("name")
            if not name:
                report.add(CSI_SECRET.code, f"{path}.nodePublishSecretRef.name", "required: the Secret the CSI driver "
                           "is handed when it mounts the volume")
            else:
                check_value(dns_1123_subdomain_problem, name, f"{path}.nodePublishSecretRef.name", report, CSI_SECRET.code)
    elif kind == "downwardAPI":
        _mode(source.get("defaultMode"), f"{path}.defaultMode", report)
        for j, item in enumerate(source.get("items") or ()):
            _downward_file(item, f"{path}.items[{j}]", report)
    elif kind == "projected":
        _mode(source.get("defaultMode"), f"{path}.defaultMode", report)
        seen: set[str] = set()
        for j, projection in enumerate(source.get("sources") or ()):
            where = f"{path}.sources[{j}]"
            kinds = [k for k in ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle")
                     if projection.get(k) is not None]
            if len(kinds) > 1:
                report.add(code, where, "may not specify more than 1 volume type per source")
            for k in kinds:
                item = projection[k]
                if k in ("secret", "configMap"):
                    if not item.get("name"):
                        report.add(code, f"{where}.{k}.name", "required")
                    paths = [i.get("path") for i in item.get("items") or ()]
                    _key_paths(item.get("items") or (), f"{where}.{k}.items", report)
                elif k == "downwardAPI":
                    paths = [i.get("path") for i in item.get("items") or ()]
                    for n, file in enumerate(item.get("items") or ()):
                        _downward_file(file, f"{where}.downwardAPI.items[{n}]", report)
                else:
                    paths = [item.get("path")]
                    if k == "serviceAccountToken":
                        seconds = item.get("expirationSeconds", 3600)
                        if not 600 <= seconds <= 2**32:
                            report.add(code, f"{where}.{k}.expirationSeconds", "must be between 10 minutes and 2^32 "
                                       "seconds")
                    if not item.get("path"):
                        report.add(code, f"{where}.{k}.path", "required")
                for file in paths:
                    if file in seen:
                        report.add(code, where, f"conflicting duplicate paths: {file!r}")
                    if file:
                        seen.add(file)
    elif kind == "ephemeral":
        template = source.get("volumeClaimTemplate")
        if template is None:
            report.add(code, f"{path}.volumeClaimTemplate", "required")
        else:
            validate_claim_template(template, f"{path}.volumeClaimTemplate", report, EPHEMERAL_CLAIM.code)
    elif kind == "image":
        policy = source.get("pullPolicy")
        if policy is not None and policy not in ("Always", "IfNotPresent", "Never"):
            report.add(code, f"{path}.pullPolicy", f"{policy!r}: supported values are Always, IfNotPresent, Never")


def _csi_driver(driver: Any, path: str, report: Report, code: str) -> None:
    if not driver:
        report.add(code, path, "required")
    elif len(driver) > 63:
        report.add(code, path, f"{driver!r} is longer than 63 characters")
    elif dns_1123_subdomain_problem(driver.lower()):
        report.add(code, path, dns_1123_subdomain_problem(driver.lower()))


def _mode(mode: Any, path: str, report: Report) -> None:
    if mode is not None and not 0 <= mode <= _FILE_MODE_MAX:
        report.add(VOLUMES.code, path, f"{mode} must be a file mode between 0 and 0777 (octal)")


def _local_path(value: str, path: str, report: Report, reserved: bool = True) -> None:
    """validateLocalDescendingPath (relative, no '..'), and for item paths not starting with '..'."""
    if value.startswith("/"):
        report.add(VOLUMES.code, path, f"{value!r} must be a relative path")
    if ".." in value.split("/"):
        report.add(VOLUMES.code, path, f"{value!r} must not contain '..'")
    elif reserved and value.startswith(".."):
        report.add(VOLUMES.code, path, f"{value!r} must not start with '..'")


def _key_paths(items: Any, path: str, report: Report) -> None:
    for j, item in enumerate(items):
        where = f"{path}[{j}]"
        if not item.get("key"):
            report.add(VOLUMES.code, f"{where}.key", "required")
        if not item.get("path"):
            report.add(VOLUMES.code, f"{where}.path", "required")
        else:
            _local_path(item["path"], f"{where}.path", report)
        _mode(item.get("mode"), f"{where}.mode", report)


def _downward_file(item: Mapping[str, Any], path: str, report: Report) -> None:
    if not item.get("path"):
        report.add(VOLUMES.code, f"{path}.path", "required")
    else:
        _local_path(item["path"], f"{path}.path", report)
    field, resource = item.get("fieldRef"), item.get("resourceFieldRef")
    if field is not None and resource is not None:
        report.add(VOLUMES.code, path, "fieldRef and resourceFieldRef can not be specified simultaneously")
    elif field is not None:
        _field_ref(field, f"{path}.fieldRef", report, _VOLUME_FIELD_PATHS, VOLUMES.code)
    elif resource is not None:
        if not resource.get("containerName"):
            report.add(VOLUMES.code, f"{path}.resourceFieldRef.containerName", "required")
        _resource_field_ref(resource, f"{path}.resourceFieldRef", report, VOLUMES.code)
    else:
        report.add(VOLUMES.code, path, "one of fieldRef and resourceFieldRef is required")
    _mode(item.get("mode"), f"{path}.mode", report)


def _mounts(container: Mapping[str, Any], path: str, report: Report, volumes: Mapping[str, Any]) -> None:
    seen: set[str] = set()
    privileged = bool((container.get("securityContext") or {}).get("privileged"))
    for j, mount in enumerate(container.get("volumeMounts") or ()):
        name, mount_path = mount.get("name"), mount.get("mountPath")
        if not name:
            report.add(VOLUMES.code, f"{path}.volumeMounts[{j}].name", "required")
        elif name not in volumes:
            report.add(VOLUMES.code, f"{path}.volumeMounts[{j}].name", f"Not found: {name!r} (no volume of the pod has "
                       "this name)")
        if not mount_path:
            report.add(VOLUMES.code, f"{path}.volumeMounts[{j}].mountPath", "required")
        elif mount_path in seen:
            report.add(VOLUMES.code, f"{path}.volumeMounts[{j}].mountPath", f"{mount_path!r} must be unique (another "
                       "mount of the container uses it)")
        seen.add(mount_path)
        if not mount.keys() & _MOUNT_OPTIONS:
            continue
        where = f"{path}.volumeMounts[{j}]"
        sub_path, expression = mount.get("subPath"), mount.get("subPathExpr")
        if (sub_path or expression) and "image" in (volumes.get(name) or {}):
            report.add(VOLUMES.code, f"{where}.subPath", "not allowed in image volume sources")
        if sub_path:
            _local_path(sub_path, f"{where}.subPath", report, reserved=False)
        if expression:
            if sub_path:
                report.add(VOLUMES.code, f"{where}.subPathExpr", "subPathExpr and subPath are mutually exclusive")
            _local_path(expression, f"{where}.subPathExpr", report, reserved=False)
        propagation = mount.get("mountPropagation")
        if propagation is not None:
            if propagation not in ("None", "HostToContainer", "Bidirectional"):
                report.add(VOLUMES.code, f"{where}.mountPropagation", f"{propagation!r}: supported values are None, "
                           "HostToContainer, Bidirectional")
            elif propagation == "Bidirectional" and not privileged:
                report.add(VOLUMES.code, f"{where}.mountPropagation", "Bidirectional mount propagation is available "
                           "only to privileged containers")
        recursive = mount.get("recursiveReadOnly")
        if recursive in ("Enabled", "IfPossible"):
            if not mount.get("readOnly"):
                report.add(VOLUMES.code, f"{where}.recursiveReadOnly", "may only be specified when readOnly is true")
            if propagation not in (None, "None"):
                report.add(VOLUMES.code, f"{where}.recursiveReadOnly", "may only be specified when mountPropagation "
                           "is None or not specified")
        elif recursive not in (None, "Disabled"):
            report.add(VOLUMES.code, f"{where}.recursiveReadOnly", f"{recursive!r}: supported values are Disabled, "
                       "Enabled, IfPossible")
    for j, device in enumerate(container.get("volumeDevices") or ()):
        where = f"{path}.volumeDevices[{j}]"
        volume = volumes.get(device.get("name"))
        if volume is None:
            report.add(VOLUMES.code, f"{where}.name", f"Not found: {device.get('name')!r}")
        elif "persistentVolumeClaim" not in volume and "ephemeral" not in volume:
            report.add(VOLUMES.code, f"{where}.name", "block devices come only from persistentVolumeClaim or ephemeral "
                       "volumes")
        if device.get("devicePath") in seen:
            report.add(VOLUMES.code, f"{where}.devicePath", "must not already exist as a path in volumeMounts")


# -- containers -----------------------------------------------------------------------------------------

def _container(container: Mapping[str, Any], path: str, report: Report, volumes: Mapping[str, Any], is_pod: bool,
               restart: str, container_names: set[Any]) -> None:
    name = container.get("name")
    problem = (dns_1123_label_problem(name) if isinstance(name, str) else "must be a string") if name else "required"
    if problem:
        report.add(POD_FIELDS.code, f"{path}.name", problem)
    image = container.get("image")
    if not image:
        report.add(POD_FIELDS.code, f"{path}.image", "required")
    elif is_pod and image != image.strip():
        report.add(POD_FIELDS.code, f"{path}.image", "must not have leading or trailing whitespace")
    policy = container.get("terminationMessagePolicy")
    if policy is not None and policy not in ("File", "FallbackToLogsOnError"):
        report.add(POD_FIELDS.code, f"{path}.terminationMessagePolicy", f"{policy!r}: supported values are File, "
                   "FallbackToLogsOnError")
    pull = container.get("imagePullPolicy")
    if pull is not None and pull not in ("Always", "IfNotPresent", "Never"):
        report.add(POD_FIELDS.code, f"{path}.imagePullPolicy", f"{pull!r}: supported values are Always, IfNotPresent, "
                   "Never")
    if container.get("ports"):
        _ports(container["ports"], f"{path}.ports", report)
    if container.get("env"):
        _env(container["env"], f"{path}.env", report, container_names)
    if container.get("envFrom"):
        _env_from(container["envFrom"], f"{path}.envFrom", report)
    _mounts(container, path, report, volumes)
    if container.get("resources"):
        validate_resources(container["resources"], f"{path}.resources", report)
    resized: set[str] = set()
    for j, policy in enumerate(container.get("resizePolicy") or ()):
        resource, action = policy.get("resourceName"), policy.get("restartPolicy")
        if resource not in ("cpu", "memory"):
            report.add(POD_FIELDS.code, f"{path}.resizePolicy[{j}]", f"{resource!r}: supported values are cpu, memory")
        elif resource in resized:
            report.add(POD_FIELDS.code, f"{path}.resizePolicy[{j}]", f"Duplicate value: {resource!r}")
        resized.add(resource)
        if action not in ("NotRequired", "RestartContainer"):
            report.add(POD_FIELDS.code, f"{path}.resizePolicy[{j}]", f"{action!r}: supported values are NotRequired, "
                       "RestartContainer")
        elif restart == "Never" and action != "NotRequired":
            report.add(POD_FIELDS.code, f"{path}.resizePolicy[{j}]", "must be 'NotRequired' when restartPolicy is "
                       "Never")
    if container.get("securityContext"):
        _security_context(container["securityContext"], f"{path}.securityContext", report)


def _lifecycle_rules(container: Mapping[str, Any], path: str, report: Report, init: bool, grace: Any) -> None:
    restart = container.get("restartPolicy")
    sidecar = init and restart == "Always"
    if restart is not None and not init:
        report.add(POD_FIELDS.code, f"{path}.restartPolicy", "may not be set for non-init containers")
    elif restart is not None and restart != "Always":
        report.add(POD_FIELDS.code, f"{path}.restartPolicy", f"{restart!r}: the only supported value is Always")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle"):
        if container.get(probe) is None:
            continue
        if init and not sidecar:
            report.add(POD_FIELDS.code, f"{path}.{probe}", "may not be set for init containers without "
                       "restartPolicy=Always")
        elif probe == "lifecycle":
            for hook in ("postStart", "preStop"):
                if container["lifecycle"].get(hook) is not None:
                    _handler(container["lifecycle"][hook], f"{path}.lifecycle.{hook}", report, grace, lifecycle=True)
        else:
            _probe(container[probe], f"{path}.{probe}", report, probe, grace)


def _probe(probe: Mapping[str, Any], path: str, report: Report, kind: str, grace: Any) -> None:
    _handler(probe, path, report, grace, lifecycle=False)
    for field in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        value = probe.get(field)
        if value is not None and value < 0:
            report.add(POD_FIELDS.code, f"{path}.{field}", f"{value} must be greater than or equal to 0")
    if kind in ("livenessProbe", "startupProbe") and probe.get("successThreshold", 1) != 1:
        report.add(POD_FIELDS.code, f"{path}.successThreshold", "must be 1")
    seconds = probe.get("terminationGracePeriodSeconds")
    if seconds is not None:
        if kind == "readinessProbe":
            report.add(POD_FIELDS.code, f"{path}.terminationGracePeriodSeconds", "must not be set for readinessProbes")
        elif seconds <= 0:
            report.add(POD_FIELDS.code, f"{path}.terminationGracePeriodSeconds", "must be greater than 0")


def _handler(handler: Mapping[str, Any], path: str, report: Report, grace: Any, lifecycle: bool) -> None:
    kinds = ("exec", "httpGet", "tcpSocket", "sleep") if lifecycle else ("exec", "httpGet", "tcpSocket", "grpc")
    present = [k for k in kinds if handler.get(k) is not None]
    if not present:
        report.add(POD_FIELDS.code, path, f"must specify a handler type ({', '.join(kinds)})")
    for extra in present[1:]:
        report.add(POD_FIELDS.code, f"{path}.{extra}", "may not specify more than 1 handler type")
    if not present:
        return
    kind, action = present[0], handler[present[0]]
    where = f"{path}.{kind}"
    if kind == "exec" and not action.get("command"):
        report.add(POD_FIELDS.code, f"{where}.command", "required")
    elif kind == "httpGet":
        _port_ref(action.get("port"), f"{where}.port", report)
        for k, header in enumerate(action.get("httpHeaders") or ()):
            name = (header or {}).get("name")
            if not (isinstance(name, str) and _HTTP_HEADER_NAME.match(name)):
                report.add(HTTP_HEADERS.code, f"{where}.httpHeaders[{k}].name", f"{name!r} is not an HTTP header name: "
                           "letters, digits and '-' only (e.g. 'X-Header-Name')")
        if action.get("scheme", "HTTP") not in ("HTTP", "HTTPS"):
            report.add(POD_FIELDS.code, f"{where}.scheme", f"{action.get('scheme')!r}: supported values are HTTP, "
                       "HTTPS")
    elif kind == "tcpSocket":
        _port_ref(action.get("port"), f"{where}.port", report)
    elif kind == "grpc":
        port = action.get("port")
        if not (is_int(port) and 1 <= port <= 65535):
            report.add(POD_FIELDS.code, f"{where}.port", f"{port!r} must be between 1 and 65535")
    elif kind == "sleep":
        seconds = action.get("seconds")
        if is_int(grace) and is_int(seconds) and not 0 <= seconds <= grace:
            report.add(POD_FIELDS.code, f"{where}.seconds", f"must be non-negative and at most "
                       f"terminationGracePeriodSeconds ({grace})")


def _port_ref(port: Any, path: str, report: Report, code: str = POD_FIELDS.code) -> None:
    """A port by number (1-65535) or by name (IANA_SVC_NAME)."""
    if is_int(port):
        if not 1 <= port <= 65535:
            report.add(code, path, f"{port} must be between 1 and 65535")
    elif isinstance(port, str):
        problem = port_name_problem(port)
        if problem:
            report.add(code, path, problem)
    else:
        report.add(code, path, "required: a port number or name")


def _security_context(context: Mapping[str, Any], path: str, report: Report) -> None:
    for field in ("runAsUser", "runAsGroup"):
        value = context.get(field)
        if value is not None and not 0 <= value <= MAX_INT32:
            report.add(POD_FIELDS.code, f"{path}.{field}", f"{value} must be between 0 and {MAX_INT32}")
    proc_mount = context.get("procMount")
    if proc_mount is not None and proc_mount not in ("Default", "Unmasked"):
        report.add(POD_FIELDS.code, f"{path}.procMount", f"{proc_mount!r}: supported values are Default, Unmasked")
    _seccomp(context.get("seccompProfile"), f"{path}.seccompProfile", report)
    _app_armor(context.get("appArmorProfile"), f"{path}.appArmorProfile", report)
    if context.get("allowPrivilegeEscalation") is False:
        if context.get("privileged"):
            report.add(POD_FIELDS.code, path, "cannot set allowPrivilegeEscalation to false and privileged to true")
        if "CAP_SYS_ADMIN" in ((context.get("capabilities") or {}).get("add") or ()):
            report.add(POD_FIELDS.code, path, "cannot set allowPrivilegeEscalation to false and add CAP_SYS_ADMIN")


def _seccomp(profile: Any, path: str, report: Report) -> None:
    if profile is None:
        return
    kind = profile.get("type")
    if kind not in ("Localhost", "RuntimeDefault", "Unconfined"):
        report.add(POD_FIELDS.code, f"{path}.type", f"{kind!r}: supported values are Localhost, RuntimeDefault, "
                   "Unconfined")
    elif kind == "Localhost" and not profile.get("localhostProfile"):
        report.add(POD_FIELDS.code, f"{path}.localhostProfile", "must be set when seccomp type is Localhost")
    elif kind != "Localhost" and profile.get("localhostProfile") is not None:
        report.add(POD_FIELDS.code, f"{path}.localhostProfile", "can only be set when seccomp type is Localhost")


def _pod_security_context(context: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    if not context:
        return
    host_network = bool(spec.get("hostNetwork"))
    for field in ("runAsUser", "runAsGroup", "fsGroup"):
        value = context.get(field)
        if value is not None and not 0 <= value <= MAX_INT32:
            report.add(POD_FIELDS.code, f"{path}.{field}", f"{value} must be between 0 and {MAX_INT32}")
    for i, group in enumerate(context.get("supplementalGroups") or ()):
        if not 0 <= group <= MAX_INT32:
            report.add(POD_FIELDS.code, f"{path}.supplementalGroups[{i}]", f"{group} must be between 0 and {MAX_INT32}")
    names: set[str] = set()
    for i, sysctl in enumerate(context.get("sysctls") or ()):
        name = sysctl.get("name") or ""
        if not name:
            report.add(POD_FIELDS.code, f"{path}.sysctls[{i}].name", "required")
        elif len(name) > 253 or not _SYSCTL.match(name):
            report.add(POD_FIELDS.code, f"{path}.sysctls[{i}].name", f"{name!r} is not a sysctl name")
        elif name in names:
            report.add(POD_FIELDS.code, f"{path}.sysctls[{i}].name", f"Duplicate value: {name!r}")
        elif host_network and name.replace("/", ".").startswith("net."):
            report.add(POD_FIELDS.code, f"{path}.sysctls[{i}].name", f"{name!r} may not be specified when hostNetwork "
                       "is true")
        names.add(name)
    policy = context.get("fsGroupChangePolicy")
    if policy is not None and policy not in ("OnRootMismatch", "Always"):
        report.add(POD_FIELDS.code, f"{path}.fsGroupChangePolicy", f"{policy!r}: supported values are OnRootMismatch, "
                   "Always")
    policy = context.get("supplementalGroupsPolicy")
    if policy is not None and policy not in ("Merge", "Strict"):
        report.add(POD_FIELDS.code, f"{path}.supplementalGroupsPolicy", f"{policy!r}: supported values are Merge, "
                   "Strict")
    _seccomp(context.get("seccompProfile"), f"{path}.seccompProfile", report)
    _app_armor(context.get("appArmorProfile"), f"{path}.appArmorProfile", report)


def _app_armor(profile: Any, path: str, report: Report) -> None:
    """ValidateAppArmorProfileField."""
    if profile is None:
        return
    kind, name = profile.get("type"), profile.get("localhostProfile")
    if not kind:
        report.add(APPARMOR.code, f"{path}.type", "required when appArmorProfile is set: Localhost, RuntimeDefault or "
                   "Unconfined")
    elif kind not in _APPARMOR_TYPES:
        report.add(APPARMOR.code, f"{path}.type", f"{kind!r}: supported values are {', '.join(_APPARMOR_TYPES)}")
    elif kind != "Localhost":
        if name is not None:
            report.add(APPARMOR.code, f"{path}.localhostProfile", "can only be set when the AppArmor type is Localhost")
    elif not isinstance(name, str) or not name.strip():
        report.add(APPARMOR.code, f"{path}.localhostProfile", "required when the AppArmor type is Localhost: the name "
                   "of a profile loaded on the node")
    else:
        if name != name.strip():
            report.add(APPARMOR.code, f"{path}.localhostProfile", f"{name!r} must not be padded with whitespace")
        if len(name) > _LOCALHOST_PROFILE_MAX:
            report.add(APPARMOR.code, f"{path}.localhostProfile", f"may not be longer than {_LOCALHOST_PROFILE_MAX} "
                       "characters")


def _dns_config(config: Any, path: str, report: Report, spec: Mapping[str, Any]) -> None:
    if not config:
        return
    servers = config.get("nameservers") or ()
    if len(servers) > 3:
        report.add(POD_FIELDS.code, f"{path}.nameservers", "must not have more than 3 nameservers")
    for i, server in enumerate(servers):
        problem = _ip_problem(server)
        if problem:
            report.add(POD_FIELDS.code, f"{path}.nameservers[{i}]", problem)
    searches = config.get("searches") or ()
    if len(searches) > 32:
        report.add(POD_FIELDS.code, f"{path}.searches", "must not have more than 32 search paths")
    if len(" ".join(searches)) > 2048:
        report.add(POD_FIELDS.code, f"{path}.searches", "must not have more than 2048 characters in the search list")
    for i, search in enumerate(searches):
        if search != ".":
            check_value(lambda s: dns_1123_subdomain_problem(s.replace("_", "a")), search.rstrip("."),
                   f"{path}.searches[{i}]", report)
    for i, option in enumerate(config.get("options") or ()):
        if not option.get("name"):
            report.add(POD_FIELDS.code, f"{path}.options[{i}]", "must not be empty")


# -- ports ----------------------------------------------------------------------------------------------

def _ports(ports: Any, path: str, report: Report) -> None:
    names: set[str] = set()
    for j, port in enumerate(ports):
        name = port.get("name")
        if name:
            problem = port_name_problem(name)
            if problem:
                report.add(PORTS.code, f"{path}[{j}].name", problem)
            elif name in names:
                report.add(PORTS.code, f"{path}[{j}].name", f"Duplicate value: {name!r} (port names are unique in a "
                           "container)")
            names.add(name)
        number = port.get("containerPort")
        if not number:
            report.add(PORTS.code, f"{path}[{j}].containerPort", "required")
        elif not 1 <= number <= 65535:
            report.add(PORTS.code, f"{path}[{j}].containerPort", f"{number} must be between 1 and 65535")
        host = port.get("hostPort")
        if host and not 1 <= host <= 65535:
            report.add(PORTS.code, f"{path}[{j}].hostPort", f"{host} must be between 1 and 65535")
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            report.add(PORTS.code, f"{path}[{j}].protocol", f"{port.get('protocol')!r}: supported values are TCP, UDP, "
                       "SCTP")


def _host_ports(containers: Any, path: str, report: Report, host_network: bool, is_pod: bool, offset: int = 0) -> None:
    """AccumulateUniqueHostPorts over `containers`; in a pod with hostNetwork every containerPort is a host port."""
    taken: dict[str, str] = {}
    for i, container in enumerate(containers, offset):
        for j, port in enumerate(container.get("ports") or ()):
            host = port.get("hostPort") or (port.get("containerPort") if host_network and is_pod else 0)
            if not host:
                continue
            key = f"{port.get('protocol', 'TCP')}/{port.get('hostIP', '')}/{host}"
            where = f"{path}[{i}].ports[{j}]"
            if key in taken:
                how = "" if port.get("hostPort") else " (with hostNetwork, its containerPort is a host port)"
                report.add(PORTS.code, f"{where}.hostPort", f"Duplicate value: {key!r}: {taken[key]} already uses host "
                           f"port {host}{how}")
            else:
                taken[key] = f"{path}[{i}].ports[{j}]" if port.get("name") is None else f"port {port['name']!r}"


# -- environment ----------------------------------------------------------------------------------------

def _env(env: Any, path: str, report: Report, container_names: set[Any]) -> None:
    relaxed = report.version >= (1, 32)
    for j, variable in enumerate(env):
        name = variable.get("name")
        problem = env_name_problem(name, relaxed) if name else "required"
        if problem:
            report.add(ENVIRONMENT.code, f"{path}[{j}].name", problem)
        source = variable.get("valueFrom")
        if source is None:
            continue
        where = f"{path}[{j}]"
        kinds = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                 if source.get(k) is not None]
        if not kinds:
            report.add(ENVIRONMENT.code, f"{where}.valueFrom", "must specify one of: fieldRef, resourceFieldRef, "
                       "configMapKeyRef or secretKeyRef")
        elif variable.get("value"):
            report.add(ENVIRONMENT.code, f"{where}.valueFrom", "may not be specified when value is not empty")
        elif len(kinds) > 1:
            report.add(ENVIRONMENT.code, f"{where}.valueFrom", f"may not have more than one field specified at a time "
                       f"({', '.join(kinds)})")
        for kind in kinds:
            item, at = source[kind], f"{where}.valueFrom.{kind}"
            if kind == "fieldRef":
                _field_ref(item, at, report, _ENV_FIELD_PATHS, ENVIRONMENT.code)
            elif kind == "resourceFieldRef":
                _resource_field_ref(item, at, report, ENVIRONMENT.code)
                other = item.get("containerName")
                if other and other not in container_names:
                    report.add(ENVIRONMENT.code, f"{at}.containerName", f"Not found: {other!r}")
            else:
                check_value(dns_1123_subdomain_problem, item.get("name") or "", f"{at}.name", report, ENVIRONMENT.code)
                key = item.get("key")
                if not key:
                    report.add(ENVIRONMENT.code, f"{at}.key", "required")
                else:
                    check_value(config_map_key_problem, key, f"{at}.key", report, ENVIRONMENT.code)


def _field_ref(item: Mapping[str, Any], path: str, report: Report, allowed: frozenset[str], code: str) -> None:
    field_path = item.get("fieldPath")
    if not field_path:
        report.add(code, f"{path}.fieldPath", "required")
        return
    subscripted = _SUBSCRIPT.match(field_path)
    if subscripted:
        key = subscripted.group(2)
        check_value(qualified_name_problem, key.lower() if "annotations" in subscripted.group(1) else key, path, report,
               code)
    elif field_path not in allowed:
        report.add(code, f"{path}.fieldPath", f"{field_path!r}: supported values are {', '.join(sorted(allowed))}")


def _resource_field_ref(item: Mapping[str, Any], path: str, report: Report, code: str) -> None:
    resource = item.get("resource")
    if not resource:
        report.add(code, f"{path}.resource", "required")
    elif resource not in _RESOURCE_FIELDS and not resource.startswith(("requests.hugepages-", "limits.hugepages-")):
        report.add(code, f"{path}.resource", f"{resource!r}: supported values are "
                   f"{', '.join(sorted(_RESOURCE_FIELDS))}")
    divisor = item.get("divisor")
    if divisor is not None and resource:
        _divisor(resource, divisor, f"{path}.divisor", report)


def _divisor(resource: str, divisor: Any, path: str, report: Report) -> None:
    """validateContainerResourceDivisor: the divisor's canonical form is one of the resource's units (a zero
    divisor is the unset one)."""
    unit = resource.partition(".")[2]
    allowed = _BYTE_DIVISORS if unit.startswith("hugepages-") else _DIVISORS.get(unit)
    canonical = canonical_quantity(str(divisor))
    if allowed is not None and canonical != "0" and canonical not in allowed:
        report.add(DIVISOR.code, path, f"{divisor!r} is not a divisor of {resource}: supported values are "
                   f"{', '.join(allowed)}")


_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


def canonical_quantity(text: str) -> str | None:
    """A quantity as the API server writes it back (resource.Quantity.String()): in the format of its suffix
    (binary, decimal or exponent), with the largest unit that keeps the number whole; a binary quantity below 1Ki
    or with a fraction is written in decimal. None when it does not parse. `1000m` is `1`, `1024Ki` is `1Mi`, but
    `1024` stays `1024` and `1e3` stays `1e3`."""
    text = text.strip()
    try:
        value = exact_quantity(text)
    except ValueError:
        return None
    if value == 0:
        return "0"
    suffix = text.lstrip("+-.0123456789")
    if suffix[:1] in ("e", "E"):
        form = "exponent"
    elif suffix.endswith("i") and abs(value) >= 1024 and value == value.to_integral_value():
        form = "binary"
    else:
        form = "decimal"
    if form == "binary":
        exponent = max(e for e in _BINARY_SUFFIXES if value % (Decimal(2) ** e) == 0)
        return f"{(value / Decimal(2) ** exponent).to_integral_value():f}{_BINARY_SUFFIXES[exponent]}"
    exponent = max((e for e in _DECIMAL_SUFFIXES if value % Decimal(1).scaleb(e) == 0), default=-9)
    number = f"{value.scaleb(-exponent).to_integral_value():f}"
    if form == "exponent":
        return number + (f"e{exponent}" if exponent else "")
    return number + _DECIMAL_SUFFIXES[exponent]


def _env_from(sources: Any, path: str, report: Report) -> None:
    relaxed = report.version >= (1, 32)
    for j, source in enumerate(sources):
        where = f"{path}[{j}]"
        prefix = source.get("prefix")
        if prefix:
            problem = env_name_problem(prefix, relaxed)
            if problem:
                report.add(ENVIRONMENT.code, f"{where}.prefix", problem)
        kinds = [k for k in ("configMapRef", "secretRef") if source.get(k) is not None]
        if len(kinds) != 1:
            report.add(ENVIRONMENT.code, where, "must specify exactly one of: configMapRef or secretRef")
        for kind in kinds:
            name = source[kind].get("name") or ""
            if not name:
                report.add(ENVIRONMENT.code, f"{where}.{kind}.name", "required")
            else:
                check_value(lambda n: dns_1123_subdomain_problem(n.rstrip("-") or n), name, f"{where}.{kind}.name", report,
                       ENVIRONMENT.code)


# -- resources ------------------------------------------------------------------------------------------

def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _resource_name_problem(name: str) -> str | None:
    """validateContainerResourceName: standard (cpu, memory, ephemeral-storage, hugepages-<size>) or extended."""
    problem = qualified_name_problem(name)
    if problem:
        return problem
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            return f"{name!r} must be a standard resource for containers (cpu, memory, ephemeral-storage, " \
                   "hugepages-<size>) or a qualified extended resource (vendor.com/name)"
    elif not _native(name) and (name.startswith("requests.") or qualified_name_problem(f"requests.{name}")):
        return f"{name!r} doesn't follow the extended resource name standard"
    return None


def validate_resources(resources: Mapping[str, Any], path: str, report: Report) -> None:
    """validateResourceRequirements of a container."""
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    parsed_limits: dict[str, Decimal] = {}
    compute = huge = False
    for side, amounts in (("limits", limits), ("requests", requests)):
        for name, text in amounts.items():
            where = f"{path}.{side}[{name}]"
            problem = _resource_name_problem(name)
            if problem:
                report.add(RESOURCES.code, where, problem)
                continue
            value = quantity(text)
            if value is None:
                report.add(RESOURCES.code, where, f"{text!r} is not a non-negative quantity")
                continue
            extended = not _native(name)
            if extended and value % 1:
                report.add(RESOURCES.code, where, f"{text!r} must be an integer: {name} is counted in whole devices")
            if name.startswith("hugepages-"):
                huge = True
                problem = huge_pages_problem(name, text)
                if problem:
                    report.add(RESOURCES.code, where, problem)
            if name in ("cpu", "memory"):
                compute = True
            if side == "limits":
                parsed_limits[name] = value
                continue
            limit = parsed_limits.get(name)
            overcommit = _native(name) and not name.startswith("hugepages-")
            if limit is not None:
                if value != limit and not overcommit:
                    report.add(RESOURCES.code, f"{path}.requests[{name}]", f"{text} must be equal to the {name} "
                               f"limit of {limits[name]}: {name} cannot be overcommitted")
                elif value > limit:
                    report.add(RESOURCES.code, f"{path}.requests[{name}]", f"{text} must be less than or equal to the "
                               f"{name} limit of {limits[name]}")
            elif not overcommit and name not in limits:
                report.add(RESOURCES.code, f"{path}.limits[{name}]", f"required: {name} is requested, and a resource "
                           "that cannot be overcommitted needs a limit equal to its request")
    if huge and not compute:
        report.add(RESOURCES.code, path, "huge pages require a cpu or memory request or limit")


_MOUNT_OPTIONS = frozenset(("subPath", "subPathExpr", "mountPropagation", "recursiveReadOnly"))
_LIFECYCLE_FIELDS = frozenset(("restartPolicy", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"))


# The pod's fields beside its containers and volumes: each checked by its own function when present.
_POD_FIELDS = {
    "hostNetwork": _host_network,
    "restartPolicy": _one_of("Always", "OnFailure", "Never"),
    "dnsPolicy": _dns_policy,
    "dnsConfig": _dns_config,
    "nodeSelector": _node_selector,
    "securityContext": _pod_security_context,
    "affinity": validate_affinity,
    "tolerations": validate_tolerations,
    "topologySpreadConstraints": validate_topology_spread,
    "readinessGates": _readiness_gates,
    "schedulingGates": _scheduling_gates,
    **{field: _named(dns_1123_subdomain_problem) for field in ("serviceAccountName", "nodeName", "priorityClassName",
                                                               "runtimeClassName")},
    **{field: _named(dns_1123_label_problem) for field in ("hostname", "subdomain")},
    "activeDeadlineSeconds": _deadline,
    "hostAliases": _host_aliases,
    "preemptionPolicy": _one_of("PreemptLowerPriority", "Never"),
    "os": _os,
    "ephemeralContainers": _ephemeral,
    "shareProcessNamespace": _share_process_namespace,
}
