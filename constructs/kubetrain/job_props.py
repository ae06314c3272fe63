"""What a platform engineer writes to define a training job: typed, documented, strict."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from kubetrain.names import Dns1035Label, Dns1123Label, EnvName
from kubetrain.quantity import check_quantity
from training.config import RunConfig

Quantity = Annotated[str, AfterValidator(check_quantity)]


def _absolute(path: str) -> str:
    if not PurePosixPath(path).is_absolute():
        raise ValueError(f"{path!r} is not an absolute path")
    return path


class StrictProps(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeResources(StrictProps):
    """What one node (one pod) of the job gets. Requests equal limits, except CPU (no limit, so no throttling)."""

    cpu: Quantity = Field(..., description="CPU cores requested, e.g. '4' or '500m'.")
    memory: Quantity = Field(..., description="Memory requested and limited, e.g. '16Gi'. Includes /dev/shm.")
    gpus: int = Field(0, ge=0, description="GPUs (nvidia.com/gpu); one process per GPU.")
    efa: int = Field(0, ge=0, description="EFA interfaces (vpc.amazonaws.com/efa); 0 for no EFA.")
    hugepages_2mi: Quantity | None = Field(
        None, description="2 MiB huge pages. Default: 5120Mi on EFA jobs (the EFA driver pre-allocates them), else none.")
    shm: Quantity = Field("1Gi", description="Size of the memory-backed /dev/shm; counts against `memory`.")


class VolumeProps(StrictProps):
    """A PersistentVolumeClaim mounted into every pod of the job."""

    name: Dns1123Label = Field(..., description="Volume name inside the pod.")
    claim: Dns1123Label = Field(..., description="Name of the PersistentVolumeClaim in the job's namespace.")
    mount_path: Annotated[str, AfterValidator(_absolute)] = Field(..., description="Where it appears in the pod.")
    read_only: bool = Field(False, description="Mount read-only (data sets).")


class ElasticProps(StrictProps):
    """Elastic membership: the job trains on any number of pods from `min_nodes` to `max_nodes`.

    Pods meet in c10d rendezvous. When one is lost for good, the others restart and resume from
    the newest checkpoint at the smaller world size; a pod that comes back joins at the next
    rendezvous. Every world size in the range must divide the global batch (KT201).
    """

    min_nodes: int = Field(..., ge=1, description="Fewest pods the job keeps training with.")
    max_nodes: int | None = Field(None, ge=1, description="Most pods that may join. Default: the job's `nodes`.")


class TrainingJobProps(StrictProps):
    """A distributed PyTorch training job: `nodes` pods, each running `torchrun` with `procs_per_node` ranks."""

    name: Dns1035Label = Field(..., description="Job name; pods and Services are named after it.")
    namespace: Dns1123Label | None = Field(None, description="Default: the cluster's first namespace.")
    image: str = Field(..., min_length=1, description="Container image with kubetrain's `training` package.")
    nodes: int = Field(..., ge=1, description="Pods (one per node): a Master and nodes - 1 Workers; "
                                              "`nodes` Workers when elastic.")
    procs_per_node: int = Field(..., ge=1, description="Training processes per pod; equals `resources.gpus` on GPUs.")
    instance_type: str | None = Field(None, description="EC2 instance type to pin pods to; enables capacity checks.")
    resources: NodeResources
    env: dict[EnvName, str] = Field(default_factory=dict, description="Extra environment; overrides defaults.")
    volumes: list[VolumeProps] = Field(default_factory=list, description="Claims to mount (checkpoints, data).")
    run: RunConfig = Field(..., description="The run config, written to a ConfigMap and read by the pods.")
    restart_policy: Literal["OnFailure", "Never", "ExitCode", "Always"] = Field(
        "ExitCode", description="`ExitCode`: exit codes 1-127 (bad config) fail the job, 128+ (signals) restart it.")
    backoff_limit: int = Field(3, ge=0, description="Pod restarts before the job is marked failed.")
    max_restarts: int = Field(3, ge=0, description="Times torchrun restarts all ranks of the job after one fails, "
                                                  "before the pod fails; each restart resumes from the newest checkpoint.")
    elastic: ElasticProps | None = Field(None, description="Default: not elastic; all `nodes` pods or none.")

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def node_range(self) -> range:
        """Every pod count the job may train with."""
        if self.elastic is None:
            return range(self.nodes, self.nodes + 1)
        return range(self.elastic.min_nodes, (self.elastic.max_nodes or self.nodes) + 1)
