"""What a platform engineer writes to define a training job: typed, documented, strict.

Everything here is a pydantic model with `extra="forbid"`, so an editor completes and checks it
and a typo is an error with a field path. Plain dicts and keywords validate into the same models.
The job's launch target (PyTorchJob, ...) is an object too: see `kubetrain.kinds.target`.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Discriminator, Field, InstanceOf, Tag, field_validator, model_validator

from kubetrain.cost.cost_props import ESTIMATE_INVALID, Estimate
from kubetrain.jobs.containers import InitContainer, Probe
from kubetrain.jobs.function import Function
from kubetrain.jobs.nsys_profile import NsysProfile
from kubetrain.kinds.target import Target
from kubetrain.kinds.trainjob import TrainJob
from kubetrain.model.efa import NcclProfile
from kubetrain.model.names import (
    AbsolutePath,
    AnnotationKey,
    Dns1035Label,
    Dns1123Label,
    Dns1123Subdomain,
    EnvName,
    ImageRef,
    LabelKey,
    LabelValue,
)
from kubetrain.model.quantity import ByteQuantity, HugePages2Mi, Quantity, parse_quantity
from kubetrain.model.strict import StrictProps
from kubetrain.platform.identity import ServiceAccount
from kubetrain.platform.kueue_queues import LocalQueue
from kubetrain.platform.node_pools import NodePool
from kubetrain.platform.queues import TopologyPlacement
from kubetrain.platform.scheduling import PriorityClass, Toleration, not_a_system_class
from kubetrain.platform.storage import Claim
from kubetrain.platform.volcano_queues import VolcanoQueue
from kubetrain.rules.registry import register
from kubetrain.rules.sources import CPU_LIMITS, PYTORCHJOB_TYPES
from kubetrain_runtime.problems import INVALID_VALUE, Text, rule_violation
from training.config import RunConfig

MAX_REPLICAS = 2**31 - 1  # replica counts are int32 in every operator's API


# -- resources ----------------------------------------------------------------------------------

ELASTIC_RANGE = register(
    "KT114", "error", "elastic range empty, or not holding the starting node count",
    rationale="An elastic job trains at any node count from min_nodes to max_nodes and starts `nodes` pods; the "
              "operator rejects a start outside min..max, and a range whose min is above its max holds no node "
              "count at all. Checked on the props, so no later rule reads an empty range.",
    fix="set elastic.min_nodes <= nodes <= elastic.max_nodes", source=PYTORCHJOB_TYPES)

CPU_LIMIT_BELOW_REQUEST = register(
    "KT156", "error", "CPU limit below the CPU request",
    rationale="A container's limit is at least its request, or the API server refuses the pod. kubetrain sets "
              "no CPU limit unless resources.cpu_limit asks for one: the CFS quota throttles data loading and "
              "the threads that drive collectives.",
    fix="set resources.cpu_limit to at least resources.cpu, or leave it out", source=CPU_LIMITS)


class NodeResources(StrictProps):
    """What one node (one pod) of the job gets. Requests equal limits, except CPU (no limit unless `cpu_limit`).

    On a pool (or a named instance type) the accelerator and EFA counts, huge pages and /dev/shm are
    derived from the instance; set them only to deviate, and the rules judge the deviation.
    """

    cpu: Quantity = Field(..., description="CPU cores requested, e.g. '4' or '500m'.")
    memory: ByteQuantity = Field(..., description="Memory requested and limited, e.g. '16Gi'. Includes /dev/shm.")
    accelerators: int | None = Field(None, ge=0, le=64, description="GPUs or Neuron devices per pod; one process per "
                                                                   "device. Default: every accelerator of the "
                                                                   "pool's (or instance type's) instance, else 0.")
    efa: int | None = Field(None, ge=0, le=64, description="EFA interfaces (vpc.amazonaws.com/efa). Default: every "
                                                          "interface of the instance (Karpenter attaches EFA only "
                                                          "for pods that request it), else 0.")
    hugepages_2mi: HugePages2Mi | None = Field(
        None, description="2 MiB huge pages. Default on EFA jobs: the EFA pool's huge_pages, else 5120Mi (the EFA "
                          "driver pre-allocates them); none otherwise.")
    shm: ByteQuantity | None = Field(None, description="Size of the memory-backed /dev/shm; counts against "
                                                       "`memory`. Default: an EFA pool's shm_fraction of `memory`, "
                                                       "else 1Gi.")
    cpu_limit: Quantity | None = Field(None, description="Opt-in CPU limit, at least `cpu`. Default: none, so "
                                                         "the kernel never throttles data loading and collectives "
                                                         "(CFS quota); equal to `cpu` (with memory, GPUs and EFA "
                                                         "already equal) makes the pod Guaranteed, for the "
                                                         "kubelet's static CPU manager.")

    @model_validator(mode="after")
    def _limit_not_below_request(self) -> NodeResources:
        if self.cpu_limit is not None and parse_quantity(self.cpu_limit) < parse_quantity(self.cpu):
            raise rule_violation(CPU_LIMIT_BELOW_REQUEST.code, f"cpu_limit {self.cpu_limit} is below the request cpu "
                                 f"{self.cpu}: the API server refuses a limit under its request",
                                 f"raise cpu_limit to at least {self.cpu}, or leave it out (no limit)",
                                 field="cpu_limit")
        return self


# -- volumes ------------------------------------------------------------------------------------

class _Volume(StrictProps):
    name: Dns1123Label = Field(..., description="Volume name inside the pod.")
    mount_path: AbsolutePath = Field(..., description="Where it appears in the pod.")

    @field_validator("mount_path")
    @classmethod
    def _not_over_the_system(cls, value: str) -> str:
        # runc refuses mounts on / and inside /proc and /sys; over /dev a volume hides the container's devices.
        parts = PurePosixPath(value).parts
        if len(parts) == 1 or parts[1] in ("proc", "sys", "dev"):
            raise rule_violation(INVALID_VALUE, f"{value} is the container's root or a system folder: the container "
                                 "runtime refuses to mount there", "mount the volume at a folder of its own, e.g. "
                                 "/data")
        return value

    # What the rules need to know about where the data lives.
    persistent: ClassVar[bool] = False  # survives the pod
    shared: ClassVar[bool] = False  # every pod of the job sees the same files

    @property
    def mounted_read_only(self) -> bool:
        return True

    def pod_volume(self) -> dict[str, Any]:
        raise NotImplementedError


class ClaimVolume(_Volume):
    """A PersistentVolumeClaim in the job's namespace (checkpoints, data sets): survives the pod.

    `claim` is a platform storage object (FsxLustre, Efs, S3Bucket: the rules then know what it can do)
    or the name of a claim defined elsewhere (assumed persistent, shared and able to rename files).
    """

    claim: Dns1123Subdomain | InstanceOf[Claim] = Field(..., description="The claim object, or a claim's name.")
    read_only: bool = Field(False, description="Mount read-only (data sets).")
    shared: ClassVar[bool] = True

    @property
    def claim_name(self) -> str:
        return self.claim if isinstance(self.claim, str) else self.claim.claim_name

    @property
    def persistent(self) -> bool:
        return True if isinstance(self.claim, str) else self.claim.persistent

    @property
    def mounted_read_only(self) -> bool:
        return self.read_only or (not isinstance(self.claim, str) and self.claim.read_only)

    def pod_volume(self) -> dict[str, Any]:
        read_only = {"readOnly": True} if self.mounted_read_only else {}
        return {"persistentVolumeClaim": {"claimName": self.claim_name, **read_only}}


class EmptyDirVolume(_Volume):
    """Scratch space on the node (or in memory), gone with the pod: caches, a fast checkpoint tier."""

    empty_dir: Literal["disk", "memory"] = Field("disk", description="`memory` counts against the memory limit.")
    size_limit: ByteQuantity | None = Field(None, description="Evict the pod beyond this size. Default: no limit.")

    @property
    def mounted_read_only(self) -> bool:
        return False

    def pod_volume(self) -> dict[str, Any]:
        source: dict[str, Any] = {"medium": "Memory"} if self.empty_dir == "memory" else {}
        if self.size_limit:
            source["sizeLimit"] = self.size_limit
        return {"emptyDir": source}


class ConfigMapVolume(_Volume):
    """A ConfigMap's keys as read-only files."""

    config_map: Dns1123Subdomain = Field(..., description="Name of the ConfigMap in the job's namespace.")

    def pod_volume(self) -> dict[str, Any]:
        return {"configMap": {"name": self.config_map}}


class SecretVolume(_Volume):
    """A Secret's keys as read-only files, by reference: the Secret itself is never in git."""

    secret: Dns1123Subdomain = Field(..., description="Name of the Secret in the job's namespace.")

    def pod_volume(self) -> dict[str, Any]:
        return {"secret": {"secretName": self.secret}}


def _volume_kind(value: Any) -> str | None:
    if isinstance(value, _Volume):
        return type(value).__name__
    if isinstance(value, dict):
        for key, kind in (("claim", "ClaimVolume"), ("empty_dir", "EmptyDirVolume"),
                          ("config_map", "ConfigMapVolume"), ("secret", "SecretVolume")):
            if key in value:
                return kind
    return None


Volume = Annotated[Union[Annotated[ClaimVolume, Tag("ClaimVolume")], Annotated[EmptyDirVolume, Tag("EmptyDirVolume")],
                         Annotated[ConfigMapVolume, Tag("ConfigMapVolume")],
                         Annotated[SecretVolume, Tag("SecretVolume")]],
                   Discriminator(_volume_kind, custom_error_type="KT003",
                                 custom_error_message="a volume needs one of claim, empty_dir, config_map or secret",
                                 custom_error_context={"fix": "add claim: <pvc name> (or empty_dir, config_map, "
                                                              "secret)", "field": ""})]


# -- the pod ------------------------------------------------------------------------------------

class SecurityContext(StrictProps):
    """The pod's security context. There is no way to ask for privileged pods or host devices."""

    run_as_user: int | None = Field(None, ge=0, le=2**31 - 1)
    run_as_group: int | None = Field(None, ge=0, le=2**31 - 1)
    fs_group: int | None = Field(None, ge=0, le=2**31 - 1, description="Group that owns mounted volumes' files.")
    run_as_non_root: bool | None = Field(None)

    @model_validator(mode="after")
    def _root_or_not(self) -> SecurityContext:
        if self.run_as_non_root and self.run_as_user == 0:
            raise rule_violation(INVALID_VALUE, "run_as_user 0 is root, and run_as_non_root forbids it: the kubelet "
                                 "refuses to start the container", "give run_as_user a non-zero uid, or drop "
                                 "run_as_non_root", field="run_as_user")
        return self


class PodSettings(StrictProps):
    """Everything else about the pods. Defaults are the safe choice; each field documents it."""

    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Added to every pod; the "
                                               "operator's and the Job controller's own labels are not the job's to "
                                               "set (KT134).")
    annotations: dict[AnnotationKey, Text] = Field(default_factory=dict, description="Added to every pod; at most "
                                                   "256 KiB in all (KT135).")
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict,
                                                      description="Added to the instance type's selector.")
    affinity: dict[str, Any] | None = Field(None, description="Kubernetes Affinity, as in a pod spec (camelCase); "
                                                              "checked against the Kubernetes schema.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Added to the accelerator's toleration.")
    priority_class: InstanceOf[PriorityClass] | Dns1123Subdomain | None = Field(
        None, description="A PriorityClass of the job's cluster, or the name of one defined elsewhere.")
    scheduler_name: Dns1123Subdomain | None = Field(None, description="Default: the cluster's scheduler.")
    service_account: InstanceOf[ServiceAccount] | Dns1123Subdomain | None = Field(
        None, description="A ServiceAccount of the job's namespace (with its IAM role: IRSA or EKS Pod Identity), or "
                          "the name of one defined elsewhere. Default: the namespace's default account.")
    mount_service_account_token: bool = Field(False, description="Training pods do not talk to the API server; "
                                                                 "mount the token only when they must (IRSA and "
                                                                 "Pod Identity do not need it: their webhooks add "
                                                                 "a token of their own).")
    init_containers: list[InitContainer] = Field(default_factory=list, description="Run to completion, in order, "
                                                                                   "before the training container.")
    liveness_probe: Probe | None = Field(None, description="The kubelet restarts the training container when it "
                                                           "fails (the pod fails under restartPolicy Never, and the "
                                                           "operator retries it). Default: none.")
    startup_probe: Probe | None = Field(None, description="Holds the liveness probe back until it passes: the "
                                                          "budget of a slow start. Default: none.")
    security_context: SecurityContext | None = Field(None)
    host_network: bool = Field(False, description="Use the node's network (brings dnsPolicy ClusterFirstWithHostNet). "
                                                  "AWS's reference EFA manifests use the pod network.")
    termination_grace_period_s: int | None = Field(
        None, ge=0, le=86400, description="Time from the pod's stop signal to its kill, in which the ranks save a "
                                          "checkpoint. Default: trainer jobs get room for their expected save time "
                                          "(at least 30); command jobs Kubernetes' 30.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(None)
    image_pull_secrets: list[Dns1123Subdomain] = Field(default_factory=list, description="Secret names.")

    @field_validator("priority_class")
    @classmethod
    def _not_a_system_class(cls, value: PriorityClass | str | None) -> PriorityClass | str | None:
        # The API server's Priority admission plugin admits system-node-critical and system-cluster-critical only
        # in kube-system, and reserves the system- prefix for them.
        return not_a_system_class(value) if isinstance(value, str) else value

    @property
    def priority_class_name(self) -> str | None:
        return self.priority_class.name if isinstance(self.priority_class, PriorityClass) else self.priority_class

    @property
    def service_account_name(self) -> str | None:
        account = self.service_account
        return account.name if isinstance(account, ServiceAccount) else account

    @field_validator("affinity")
    @classmethod
    def _affinity_is_kubernetes(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from kubetrain.jobs.affinity import check_affinity
            check_affinity(value)
        return value


# -- what runs ----------------------------------------------------------------------------------

class Trainer(StrictProps):
    """kubetrain's own trainer (`python -m training`), configured by a typed run config."""

    kind: Literal["trainer"] = "trainer"
    run: RunConfig = Field(..., description="The run config, written to a ConfigMap and read by the pods.")


class Parallelism(StrictProps):
    """How a command job splits its model and batch, so the rules can check it (Megatron-LM and NeMo terms)."""

    tensor: int = Field(1, ge=1, description="Tensor-parallel size; stays inside a node.")
    pipeline: int = Field(1, ge=1, description="Pipeline-parallel size.")
    context: int = Field(1, ge=1, description="Context-parallel size.")
    micro_batch: int = Field(..., ge=1, description="Sequences per data-parallel rank per forward/backward.")
    global_batch: int = Field(..., ge=1, description="Sequences per optimizer step over all ranks.")

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline * self.context


class CommandModel(StrictProps):
    """What a command job trains, for the memory check (KT240): the architecture and how a rank runs it. A
    Megatron-LM command's own flags say the same things (--num-layers, --bf16, ...) and must agree (KT165);
    without this declaration they alone are read."""

    layers: int = Field(..., ge=1, description="Decoder layers.")
    hidden: int = Field(..., ge=1, description="Width of the residual stream.")
    heads: int = Field(..., ge=1, description="Attention heads.")
    kv_heads: int | None = Field(None, ge=1, description="Key/value heads (grouped-query attention). Default: heads.")
    ffn: int = Field(..., ge=1, description="The MLP's hidden width.")
    vocab: int = Field(..., ge=1, description="Vocabulary size (padded, as the embedding holds it).")
    gated_mlp: bool = Field(True, description="SwiGLU (three matrices, Llama's) or a plain two-matrix MLP.")
    tied_embeddings: bool = Field(False, description="The output layer shares the embedding's weights.")
    seq_len: int = Field(..., ge=1, description="Tokens per sequence.")
    strategy: Literal["megatron", "fsdp", "ddp"] = Field(
        "megatron", description="How the model is spread: Megatron-LM's tensor/pipeline/data parallelism (sizes "
                                "from `parallelism`), PyTorch FSDP2 over every rank, or DDP.")
    precision: Literal["bf16", "fp32"] = Field("bf16", description="bf16 mixed precision (fp32 master weights and "
                                                                   "gradients) or fp32.")
    recompute: Literal["none", "selective", "full"] = Field("none", description="Activation recomputation.")
    distributed_optimizer: bool = Field(False, description="Megatron-LM's --use-distributed-optimizer: master "
                                                           "weights and Adam's moments sharded over data-parallel "
                                                           "ranks.")


class Command(StrictProps):
    """The user's own program in the user's image: a torchrun script, Megatron-LM, NeMo.

    With `launcher: torchrun`, kubetrain writes torchrun's flags from the target's contract and
    appends `command` (a script and its arguments, or `-m module ...`). With `launcher: none` the
    command runs as given, once per pod, and must read the target's variables itself.
    """

    kind: Literal["command"] = "command"
    command: list[Text] = Field(..., min_length=1, description="The script and its arguments, e.g. "
                                                              "['pretrain_gpt.py', '--tensor-model-parallel-size', '2'].")
    launcher: Literal["torchrun", "none"] = Field("torchrun", description="How the command is started in each pod.")
    working_dir: AbsolutePath | None = Field(None, description="Working directory. Default: the image's.")
    parallelism: Parallelism | None = Field(None, description="Checked against the world size when given.")
    model: CommandModel | None = Field(None, description="What it trains, for the memory check (KT240). Default: "
                                                         "what a Megatron-LM command's flags say, else the "
                                                         "estimate's model.")
    checkpoint_dir: AbsolutePath | None = Field(None, description="Where the program saves checkpoints; checked to "
                                                                  "be on a persistent volume when given.")
    profile: NsysProfile | None = Field(None, description="Nsight Systems on the ranks (kubetrain.jobs.nsys_profile): "
                                                          "each rank's report on a persistent volume. Needs "
                                                          "launcher torchrun. Default: off.")

    @field_validator("command")
    @classmethod
    def _no_empty_words(cls, value: list[str]) -> list[str]:
        if any(not word for word in value):
            raise ValueError("command words must not be empty")
        return value


Workload = Annotated[Union[Trainer, Command, Function], Field(discriminator="kind")]


class Elastic(StrictProps):
    """Elastic membership: the job trains on any number of pods from `min_nodes` to `max_nodes`.

    Pods meet in c10d rendezvous. When one is lost for good, the others restart and resume from
    the newest checkpoint at the smaller world size; a pod that comes back joins at the next
    rendezvous. Every world size in the range must divide the global batch (KT201).
    """

    min_nodes: int = Field(..., ge=1, le=MAX_REPLICAS, description="Fewest pods the job keeps training with.")
    max_nodes: int | None = Field(None, ge=1, le=MAX_REPLICAS, description="Most pods that may join. "
                                                                          "Default: the job's `nodes`.")

    @model_validator(mode="after")
    def _a_range(self) -> Elastic:
        # An empty range would leave no world size to check or run at: refused here, before any rule reads it.
        if self.max_nodes is not None and self.min_nodes > self.max_nodes:
            raise rule_violation(ELASTIC_RANGE.code, f"min_nodes {self.min_nodes} is above max_nodes "
                                 f"{self.max_nodes}: no node count is in the range",
                                 f"set min_nodes at most max_nodes, e.g. min_nodes={self.max_nodes} or "
                                 f"max_nodes={self.min_nodes}", field="min_nodes")
        return self


# -- the job ------------------------------------------------------------------------------------

class TrainingJobProps(StrictProps):
    """A distributed PyTorch training job: `nodes` pods, each running `procs_per_node` ranks."""

    name: Dns1035Label = Field(..., description="Job name; pods and Services are named after it.")
    namespace: Dns1123Label | None = Field(None, description="Default: the cluster's first namespace.")
    image: ImageRef = Field(..., description="Container image: kubetrain's trainer, or the user's for a command.")
    nodes: int = Field(..., ge=1, le=MAX_REPLICAS, description="Pods, one per node.")
    procs_per_node: int = Field(..., ge=1, le=1024, description="Ranks per pod; equals the accelerators per pod.")
    instance_type: str | None = Field(None, description="EC2 instance type to pin pods to, from the cluster's "
                                                        "instance catalog; enables capacity checks.")
    resources: NodeResources
    workload: Workload = Field(..., description="What runs: Trainer(run=...), Command(command=[...]) or "
                                                "Function(train, kwargs={...}).")
    env: dict[EnvName, Text] = Field(default_factory=dict, description="Extra environment; overrides defaults.")
    volumes: list[Volume] = Field(default_factory=list, description="Volumes to mount (checkpoints, data, caches).")
    pod: PodSettings = Field(default_factory=PodSettings, description="Labels, scheduling, security, networking.")
    target: InstanceOf[Target] = Field(default_factory=TrainJob,
                                       description="The operator that runs it. Default: Kubeflow Trainer v2's TrainJob "
                                                   "(PyTorchJob() for elastic jobs or the training operator v1).")
    pool: InstanceOf[NodePool] | None = Field(None, description="The node pool the pods run on: the instance type, "
                                                                "node selector and tolerations come from it, and "
                                                                "the rules check the pods fit it.")
    queue: InstanceOf[LocalQueue] | InstanceOf[VolcanoQueue] | None = Field(
        None, description="The queue that admits the job (gang scheduling). Default: none, scheduled at once.")
    placement: TopologyPlacement | None = Field(None, description="Topology-aware placement of the pods (Kueue).")
    nccl: NcclProfile | None = Field(None, description="The image's aws-ofi-nccl and NCCL versions: an EFA job's "
                                                       "environment is derived from them. Default: an unnamed "
                                                       "stack, given what is right for every aws-ofi-nccl "
                                                       "(kubetrain.model.efa).")
    restart_policy: Literal["ExitCode", "OnFailure", "Never"] = Field(
        "ExitCode", description="`ExitCode`: a permanent failure (exit 1-127: a bad config, unusable checkpoint "
                                "storage, a run that keeps diverging) fails the job at once; a job whose ranks keep "
                                "failing (kubetrain's launcher exits 200), a stopped or a killed pod (128+) is "
                                "restarted.")
    backoff_limit: int = Field(3, ge=0, le=MAX_REPLICAS, description="Pod restarts before the job is marked failed.")
    max_restarts: int = Field(3, ge=0, le=10_000, description="Times torchrun restarts all ranks of a pod after one "
                                                              "fails, before the pod fails; each resumes from the "
                                                              "newest checkpoint.")
    elastic: Elastic | None = Field(None, description="Default: not elastic; all `nodes` pods or none.")
    estimate: Estimate | None = Field(None, description="What `kubetrain cost` assumes: MFU and ETTR (defaults "
                                                        "cited in kubetrain/cost/cost_props.py), and for a command job "
                                                        "what it trains. Not part of the run's definition: "
                                                        "changing it re-prices the run without re-running it.")

    @model_validator(mode="after")
    def _elastic_range_holds_nodes(self) -> TrainingJobProps:
        elastic = self.elastic
        if elastic is None:
            return self
        most = elastic.max_nodes or self.nodes
        if not elastic.min_nodes <= self.nodes <= most:
            field = "min_nodes" if elastic.min_nodes > self.nodes else "max_nodes"
            raise rule_violation(ELASTIC_RANGE.code, f"the job starts {self.nodes} pods, outside its elastic range "
                                 f"{elastic.min_nodes}..{most}", f"set elastic.min_nodes <= nodes ({self.nodes}) <= "
                                 "elastic.max_nodes", field=f"elastic.{field}")
        return self

    @model_validator(mode="after")
    def _estimate_fits_the_workload(self) -> TrainingJobProps:
        if self.estimate is None:
            return self
        if isinstance(self.workload, Trainer) and self.estimate.declares_work:
            raise rule_violation(ESTIMATE_INVALID.code, "a trainer job's work comes from its run config (max_steps, "
                                 "batch.global_size, data.seq_len, model)", ESTIMATE_INVALID.fix, field="estimate")
        if not isinstance(self.workload, Trainer) and not self.estimate.declares_work:
            raise rule_violation(ESTIMATE_INVALID.code, f"a {self.workload.kind} job's estimate must say what it "
                                 "trains", ESTIMATE_INVALID.fix, field="estimate")
        return self

    @model_validator(mode="after")
    def _one_source_of_the_instance(self) -> TrainingJobProps:
        if self.pool is not None and self.instance_type is not None:
            raise rule_violation(INVALID_VALUE, f"both pool {self.pool.name} and instance_type {self.instance_type} "
                                 "say where the pods run", "drop instance_type: the pool's instance type is used",
                                 field="instance_type")
        return self
