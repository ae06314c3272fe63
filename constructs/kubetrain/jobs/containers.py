"""Typed container parts of a job's pods: liveness and startup probes, and init containers.

    pod=PodSettings(
        startup_probe=Probe(http_get=HttpGet(port="metrics", path="/metrics"), period_s=10, failure_threshold=60),
        liveness_probe=Probe(tcp_socket=TcpSocket(port="metrics"), period_s=30, failure_threshold=4),
        init_containers=[InitContainer(name="fetch-tokenizer", command=["python", "-m", "fetch", "/data/tok"],
                                       volume_mounts=[VolumeMount(name="data", mount_path="/data")])])

Each part is checked as the API server checks it (k8s.io/kubernetes pkg/apis/core/validation, validateProbe,
validateInitContainers): a probe has exactly one handler, its period, timeout and thresholds are at least 1 (0 is
never written: the API server would default it) and a liveness or startup probe succeeds after exactly one success.
What the API server cannot see is checked too: a port named in a probe must be a port of the container (the
kubelet resolves the name when it probes, and a liveness probe on a missing name kills the container), an init
container mounts only volumes the pod has, and its name is none of the pod's other containers'.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kubetrain.model.names import AbsolutePath, Dns1123Label, EnvName, ImageRef, PortName
from kubetrain.model.quantity import ByteQuantity, Quantity
from kubetrain.model.strict import StrictProps
from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_INIT_CONTAINERS, K8S_PROBES, cite
from kubetrain_runtime.problems import Problem, Text, rule_violation

PROBE_INVALID = register(
    "KT150", "error", "probe the API server refuses, or one that probes a port the container does not have",
    rationale="A probe names exactly one handler (exec, httpGet or tcpSocket), probes at least every second and "
              "fails after at least one failure; a liveness or startup probe succeeds after one success. The API "
              "server refuses other probes, after the pull request was merged. A port given by name must be one of "
              "the container's ports: the kubelet resolves the name on every probe, and a liveness probe that "
              "cannot find its port fails until it kills the container.",
    fix="give one handler, periods and thresholds of at least 1 (success_threshold 1), and a port by number or by "
        "the name of one of the container's ports (a trainer's first metrics port is named 'metrics')",
    source=cite(K8S_PROBES, "https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/apis/core/validation/"
                            "validation.go"))
INIT_CONTAINER_INVALID = register(
    "KT151", "error", "init container the API server refuses or the pod cannot start",
    rationale="Every container of a pod has a name of its own, an init container runs to completion before the "
              "training container starts (so it takes no probes), and it mounts only volumes the pod defines; "
              "otherwise the API server refuses the pod, or the kubelet cannot start it.",
    fix="name each init container uniquely (not after the training container), mount the job's own volumes by "
        "name, and leave probes to the training container",
    source=cite(K8S_INIT_CONTAINERS, "https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/apis/core/"
                                     "validation/validation.go"))

PortRef = int | PortName


class _Port(StrictProps):
    port: PortRef = Field(..., description="The container port's number (1-65535), or its name (e.g. 'metrics').")

    @field_validator("port")
    @classmethod
    def _in_range(cls, value: PortRef) -> PortRef:
        if isinstance(value, int) and not 1 <= value <= 65535:
            raise rule_violation(PROBE_INVALID.code, f"port {value} is not between 1 and 65535",
                                 "give the container port's number (1-65535) or its name")
        return value


class HttpGet(_Port):
    """An HTTP GET on the container: a status 200-399 passes."""

    path: str = Field("/", pattern=r"^/", description="The path to request, from '/'.")
    scheme: Literal["HTTP", "HTTPS"] = Field("HTTP")


class TcpSocket(_Port):
    """A TCP connection to the container's port: the probe passes when it opens."""


class Exec(StrictProps):
    """A command run inside the container (not a shell unless it starts one): exit 0 passes."""

    command: list[Text] = Field(..., min_length=1, description="e.g. ['cat', '/tmp/healthy'].")


class Probe(StrictProps):
    """A liveness or startup probe of the training container (Kubernetes' Probe). Exactly one handler.

    A startup probe holds the liveness probe back until it passes: give the slow start of a training job (loading
    a checkpoint, compiling) to the startup probe, and keep the liveness probe strict.
    """

    exec: Exec | None = Field(None, description="Run a command in the container.")
    http_get: HttpGet | None = Field(None, description="GET a path on a port of the container.")
    tcp_socket: TcpSocket | None = Field(None, description="Open a TCP connection to a port of the container.")
    initial_delay_s: int = Field(0, ge=0, description="Seconds after the container starts before the first probe.")
    period_s: int = Field(10, ge=1, description="Seconds between probes.")
    timeout_s: int = Field(1, ge=1, description="Seconds a probe may take.")
    failure_threshold: int = Field(3, ge=1, description="Failures in a row that fail the probe (liveness: the "
                                                        "kubelet kills the container).")
    success_threshold: int = Field(1, description="Always 1 for liveness and startup probes.")

    @field_validator("success_threshold")
    @classmethod
    def _one_success(cls, value: int) -> int:
        if value != 1:
            raise rule_violation(PROBE_INVALID.code, f"success_threshold {value}: a liveness or startup probe "
                                 "succeeds after exactly one success (the API server refuses any other)",
                                 "set success_threshold to 1, or leave it out")
        return value

    @model_validator(mode="after")
    def _one_handler(self) -> Probe:
        handlers = [name for name in ("exec", "http_get", "tcp_socket") if getattr(self, name) is not None]
        if len(handlers) != 1:
            said = "no handler" if not handlers else f"{len(handlers)} handlers ({', '.join(handlers)})"
            raise rule_violation(PROBE_INVALID.code, f"a probe has exactly one handler, this one has {said}",
                                 "give one of exec, http_get or tcp_socket")
        return self

    @property
    def port(self) -> PortRef | None:
        handler = self.http_get or self.tcp_socket
        return handler.port if handler is not None else None

    def manifest(self) -> dict[str, Any]:
        if self.exec is not None:
            handler: dict[str, Any] = {"exec": {"command": list(self.exec.command)}}
        elif self.http_get is not None:
            handler = {"httpGet": {"path": self.http_get.path, "port": self.http_get.port,
                                   "scheme": self.http_get.scheme}}
        else:
            handler = {"tcpSocket": {"port": self.tcp_socket.port}}
        return {**handler, "initialDelaySeconds": self.initial_delay_s, "periodSeconds": self.period_s,
                "timeoutSeconds": self.timeout_s, "failureThreshold": self.failure_threshold,
                "successThreshold": self.success_threshold}


class VolumeMount(StrictProps):
    """One of the job's volumes, mounted in an init container."""

    name: Dns1123Label = Field(..., description="The name of one of the job's volumes.")
    mount_path: AbsolutePath = Field(..., description="Where it appears in the init container.")
    read_only: bool = Field(False)


class InitContainer(StrictProps):
    """A container that runs to completion, in order, before the training container starts (fetch a tokenizer,
    warm a cache, wait for a service). It gets kubetrain's security defaults; it takes no probes."""

    name: Dns1123Label = Field(..., description="Unique among the pod's containers.")
    image: ImageRef | None = Field(None, description="Default: the job's image.")
    command: list[Text] = Field(..., min_length=1, description="The program and its arguments, as run (no shell "
                                                               "unless it starts one).")
    env: dict[EnvName, Text] = Field(default_factory=dict, description="Its environment (the job's env is the "
                                                                       "training container's).")
    working_dir: AbsolutePath | None = Field(None, description="Default: the image's.")
    volume_mounts: list[VolumeMount] = Field(default_factory=list, description="The job's volumes it needs.")
    cpu: Quantity | None = Field(None, description="CPU requested. Default: none.")
    memory: ByteQuantity | None = Field(None, description="Memory requested and limited. Default: none.")

    def manifest(self, image: str, pull_policy: str | None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": self.name, "image": self.image or image}
        if pull_policy:
            container["imagePullPolicy"] = pull_policy
        container["command"] = list(self.command)
        if self.working_dir:
            container["workingDir"] = self.working_dir
        if self.env:
            container["env"] = [{"name": name, "value": value} for name, value in self.env.items()]
        requests = {key: value for key, value in (("cpu", self.cpu), ("memory", self.memory)) if value}
        if requests:
            container["resources"] = {"requests": requests, **({"limits": {"memory": self.memory}}
                                                               if self.memory else {})}
        if self.volume_mounts:
            container["volumeMounts"] = [{"name": m.name, "mountPath": m.mount_path,
                                          **({"readOnly": True} if m.read_only else {})} for m in self.volume_mounts]
        container["securityContext"] = {"allowPrivilegeEscalation": False}
        return container


def container_part_problems(init_containers: list[InitContainer], probes: dict[str, Probe | None],
                            container_name: str, port_names: list[str], volume_names: list[str]) -> list[Problem]:
    """KT150 and KT151 against the pod: probed ports the training container has (`port_names`), init containers'
    names against each other and the training container, their mounts against the pod's volumes."""
    problems = []
    for field, probe in probes.items():
        port = probe.port if probe is not None else None
        if isinstance(port, str) and port not in port_names:
            handler = "http_get" if probe.http_get is not None else "tcp_socket"
            has = f"its ports are {', '.join(port_names)}" if port_names else "it has no named ports"
            problems.append(Problem(PROBE_INVALID.code, f"pod.{field}.{handler}.port", f"port {port!r} is not a "
                                    f"port of the training container ({has})", PROBE_INVALID.fix))
    seen = {container_name: "the training container"}
    for i, init in enumerate(init_containers):
        where = f"pod.init_containers.{i}"
        if init.name in seen:
            problems.append(Problem(INIT_CONTAINER_INVALID.code, f"{where}.name", f"{init.name!r} is already the "
                                    f"name of {seen[init.name]}", "give each container of the pod its own name"))
        seen.setdefault(init.name, f"init container {i}")
        paths: set[str] = set()
        for j, mount in enumerate(init.volume_mounts):
            if mount.name not in volume_names:
                problems.append(Problem(INIT_CONTAINER_INVALID.code, f"{where}.volume_mounts.{j}.name",
                                        f"the pod has no volume {mount.name!r}",
                                        f"mount one of the job's volumes: {', '.join(volume_names) or 'none'}"))
            if mount.mount_path in paths:
                problems.append(Problem(INIT_CONTAINER_INVALID.code, f"{where}.volume_mounts.{j}.mount_path",
                                        f"{mount.mount_path} is mounted twice", "mount each path once"))
            paths.add(mount.mount_path)
    return problems
