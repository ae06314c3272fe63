"""The rules of the output check: Kubernetes' own validation of built-in objects, and of what operators create.

Each class of field has its code, so `kubetrain explain` says what the API server checks there and where
its source is. These are errors: the API server (or the controller creating a pod) refuses the object.
"""

from __future__ import annotations

from kubetrain.rules.registry import register
from kubetrain.rules.sources import (
    JOBSET_WEBHOOK,
    K8S_APPS_VALIDATION,
    K8S_BATCH_VALIDATION,
    K8S_CORE_VALIDATION,
    K8S_SCHEDULING_VALIDATION,
    K8S_STORAGE_VALIDATION,
    LABELS_AND_SELECTORS,
    MPI_OPERATOR,
    NAME_FORMATS,
    OBJECT_META,
    PYTORCHJOB,
    PYTORCHJOB_WEBHOOK,
    TRAINER,
    cite,
)

# The kubelet's admission of a pod's AppArmor profiles: stricter than the API server's (see KT632).
KUBELET_APPARMOR = "https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/security/apparmor/validate.go"

_ESCAPE_HATCH = ("fix the field the message names: in a job.patch(...) or a raw object of the fleet; if kubetrain's "
                 "own output is wrong, report it")

METADATA = register(
    "KT610", "error", "object name, labels or annotations the API server refuses",
    rationale="Names follow the kind's format (a Service or a training job's name is a DNS-1035 label, a namespace "
              "a DNS-1123 label, most objects a DNS-1123 subdomain), label keys are qualified names and values at "
              "most 63 characters, annotations total at most 256 KiB, and an object synced by Argo CD needs a fixed "
              "name (generateName makes a new object on every sync).",
    fix=_ESCAPE_HATCH, source=cite(OBJECT_META, LABELS_AND_SELECTORS, NAME_FORMATS, K8S_CORE_VALIDATION))
TOLERATIONS = register(
    "KT611", "error", "toleration the API server refuses",
    rationale="An empty key needs operator Exists; Exists takes no value; tolerationSeconds needs effect NoExecute; "
              "keys are qualified names, values label values, effects NoSchedule, PreferNoSchedule or NoExecute.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
AFFINITY = register(
    "KT612", "error", "affinity, node selector or topology spread the API server refuses, or that matches no node",
    rationale="A required node affinity needs at least one term and a term at least one expression; In/NotIn need "
              "values, Exists/DoesNotExist none, Gt/Lt exactly one integer; weights are 1-100; pod (anti-)affinity "
              "terms need a topologyKey and valid label selectors.",
    fix=_ESCAPE_HATCH, source=cite(K8S_CORE_VALIDATION, LABELS_AND_SELECTORS))
RESOURCES = register(
    "KT613", "error", "container resources the API server refuses",
    rationale="Requests may not exceed limits; extended resources (GPUs, EFA) and huge pages cannot be "
              "overcommitted, so their requests must equal their limits, extended resources are whole numbers, huge "
              "pages a multiple of their page size and need a cpu or memory request; names are standard or "
              "qualified.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
PORTS = register(
    "KT614", "error", "container ports the API server refuses, or two that take one host port",
    rationale="Ports are 1-65535 and names IANA service names of at most 15 characters, unique in the container; "
              "with hostNetwork every container port is a host port, so two containers (or two ports) on the same "
              "port and protocol conflict and the pod is refused.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
VOLUMES = register(
    "KT615", "error", "volumes or mounts the API server refuses",
    rationale="Volume names are unique DNS labels with exactly one source; every mount names a volume of the pod, "
              "mount paths are unique in a container, and subPath is a relative path without '..'.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
ENVIRONMENT = register(
    "KT616", "error", "environment variables the API server refuses",
    rationale="Names are printable ASCII without '=' (Kubernetes 1.32+; older servers: letters, digits, '_', '-' "
              "and '.', not starting with a digit); valueFrom takes exactly one source and no value beside it.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
POD_FIELDS = register(
    "KT617", "error", "container or pod field the API server refuses",
    rationale="Container names are unique DNS labels, images are required, probes and lifecycle hooks take one "
              "handler, restart and DNS policies take their enumerated values, security contexts stay in range.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
JOB = register(
    "KT618", "error", "batch Job the API server refuses",
    rationale="A Job's pods carry the labels of its generated selector (batch.kubernetes.io/job-name and job-name "
              "set to the Job's name, controller-uid to its uid): a template label with another value is refused. "
              "Indexed mode needs completions; backoffLimitPerIndex and maxFailedIndexes need Indexed mode; "
              "podFailurePolicy rules name a container of the pod, list unique, ordered exit codes (not 0 for In) "
              "and need restartPolicy Never; successPolicy needs Indexed mode and indexes below completions.",
    fix=_ESCAPE_HATCH, source=K8S_BATCH_VALIDATION)
SERVICE = register(
    "KT619", "error", "Service the API server refuses",
    rationale="A Service's name is a DNS-1035 label; with more than one port every port needs a unique name; ports "
              "are 1-65535, targetPort a number or a port name, a headless Service has clusterIP None, selector keys "
              "and values are label syntax.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
DERIVED_NAMES = register(
    "KT620", "error", "a name the operator or a controller derives from this object would be refused",
    rationale="Operators name pods, Services and Jobs after the object (PyTorchJob <job>-worker-<i>, JobSet "
              "<job>-node-0 and its pods <job>-node-0-<i>, MPIJob <job>-launcher and <job>-worker-<i>) and put "
              "the name in label values; hostnames and label values are at most 63 characters, so a long name is "
              "accepted and its pods are never created.",
    fix="shorten the object's name (or the replica count that adds digits)",
    source=cite(PYTORCHJOB, TRAINER, JOBSET_WEBHOOK, MPI_OPERATOR, K8S_BATCH_VALIDATION))
WORKLOADS = register(
    "KT621", "error", "DaemonSet, Deployment, ReplicaSet or StatefulSet the API server refuses",
    rationale="The selector must be valid, non-empty and match the template's labels; their pods restart Always "
              "and take no activeDeadlineSeconds; replica counts and rollout settings stay in range.",
    fix=_ESCAPE_HATCH, source=K8S_APPS_VALIDATION)
STORAGE = register(
    "KT622", "error", "PersistentVolume, claim or StorageClass the API server refuses",
    rationale="Volumes and claims need access modes (ReadWriteOncePod alone), a positive storage size and one "
              "volume source; a CSI driver name is at most 63 characters; a StorageClass names its provisioner and "
              "takes Delete or Retain, Immediate or WaitForFirstConsumer.",
    fix=_ESCAPE_HATCH, source=cite(K8S_CORE_VALIDATION, K8S_STORAGE_VALIDATION))
DATA = register(
    "KT623", "error", "ConfigMap or Secret data the API server refuses",
    rationale="Keys are letters, digits, '-', '_' and '.' (not '.' or '..'), unique across data and binaryData, "
              "and the values total at most 1 MiB.",
    fix=_ESCAPE_HATCH, source=K8S_CORE_VALIDATION)
SCHEDULING = register(
    "KT624", "error", "PriorityClass or Namespace the API server refuses",
    rationale="User priority classes are at most 1000000000 and may not start with 'system-'; a namespace's "
              "finalizers are qualified names.",
    fix=_ESCAPE_HATCH, source=cite(K8S_SCHEDULING_VALIDATION, K8S_CORE_VALIDATION))
ADMISSION = register(
    "KT625", "error", "the operator's admission webhook refuses the custom resource",
    rationale="Operators validate their custom resources when they are created: a PyTorchJob needs a container "
              "named pytorch in every replica and exactly one Master; JobSet needs its Jobs' and pods' names to be "
              "DNS-1035 labels.",
    fix=_ESCAPE_HATCH, source=cite(PYTORCHJOB_WEBHOOK, JOBSET_WEBHOOK))
HTTP_HEADERS = register(
    "KT626", "error", "an HTTP header name of a probe or lifecycle hook the API server refuses",
    rationale="httpGet.httpHeaders[].name of a probe or a postStart/preStop hook is an HTTP header field name: "
              "letters, digits and '-' only (apimachinery's IsHTTPHeaderName), so 'X_Token', 'X Token' or an empty "
              "name is refused with the whole object.",
    fix="name the header with letters, digits and '-' only (e.g. X-Auth-Token)", source=K8S_CORE_VALIDATION)
PROCESS_NAMESPACE = register(
    "KT627", "error", "shareProcessNamespace together with hostPID",
    rationale="A pod shares one process namespace among its containers or uses the node's (hostPID), not both: "
              "the API server refuses the pod.",
    fix="drop spec.shareProcessNamespace or spec.hostPID (a training pod needs neither)", source=K8S_CORE_VALIDATION)
CSI_SECRET = register(
    "KT628", "error", "an inline CSI volume's secret reference the API server refuses",
    rationale="csi.nodePublishSecretRef, when given, names a Secret of the pod's namespace: the name is required "
              "and is a DNS-1123 subdomain.",
    fix="name the Secret the CSI driver reads in csi.nodePublishSecretRef.name, or drop nodePublishSecretRef",
    source=K8S_CORE_VALIDATION)
TYPED_SECRET = register(
    "KT629", "error", "a typed Secret without its required keys or with content its type refuses",
    rationale="A Secret's type fixes keys: kubernetes.io/dockerconfigjson needs .dockerconfigjson and "
              "kubernetes.io/dockercfg needs .dockercfg, each a JSON object; basic-auth needs username or password; "
              "ssh-auth a non-empty ssh-privatekey; tls both tls.crt and tls.key; service-account-token the "
              "kubernetes.io/service-account.name annotation. stringData counts as data.",
    fix="add the key the type requires (in data, base64, or stringData), with the content the message names; or use "
        "type Opaque", source=K8S_CORE_VALIDATION)
EPHEMERAL_CLAIM = register(
    "KT630", "error", "an ephemeral volume's claim template the API server refuses",
    rationale="ephemeral.volumeClaimTemplate is checked as the claim it becomes: its spec needs access modes "
              "(ReadWriteOncePod alone) and a storage request above zero; its metadata may hold only labels and "
              "annotations (the claim is named <pod>-<volume>).",
    fix="give volumeClaimTemplate.spec accessModes (e.g. [ReadWriteOnce]) and resources.requests.storage (e.g. "
        "100Gi); move other metadata to labels or annotations", source=K8S_CORE_VALIDATION)
DIVISOR = register(
    "KT631", "error", "a resourceFieldRef divisor the API server refuses",
    rationale="A downward-API resourceFieldRef divides the resource by a unit: cpu by 1m or 1; memory, "
              "ephemeral-storage and huge pages by 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi or 1Ei, compared "
              "in the quantity's canonical form (1000m is 1; 1024 is not 1Ki, 1e3 is not 1k).",
    fix="use one of the divisors the message lists (e.g. 1Mi to read memory in MiB), or drop divisor (default 1)",
    source=K8S_CORE_VALIDATION)
APPARMOR = register(
    "KT632", "error", "an AppArmor profile of type Localhost without its profile name, or an AppArmor field refused",
    rationale="securityContext.appArmorProfile of type Localhost needs localhostProfile (non-empty, unpadded, at "
              "most 4095 characters), and only Localhost takes one. The annotation form "
              "container.apparmor.security.beta.kubernetes.io/<container>: localhost/ (no name) passes the API "
              "server, but the kubelet refuses to run the pod (invalid empty AppArmor profile name).",
    fix="name the profile loaded on the node (localhostProfile: my-profile, or the annotation localhost/my-profile), "
        "or use RuntimeDefault", source=cite(K8S_CORE_VALIDATION, KUBELET_APPARMOR))
