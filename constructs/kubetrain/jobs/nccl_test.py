"""NcclTest: prove a pool's EFA bandwidth with NCCL's own benchmark before a long run.

An MPIJob (kubetrain.kinds.mpijob renders it) runs nccl-tests' `all_reduce_perf` (or another
collective) across `nodes` workers, one rank per GPU. Its launcher prints a summary line,

    # Avg bus bandwidth    : 312.457

in GB/s, to compare with the job's `kubetrain.dev/expected-busbw-gbytes` annotation: the
instance's estimate from the catalog. Far below it means EFA is not in use (a missing
`vpc.amazonaws.com/efa` request, the wrong FI_PROVIDER) or a bad node: the guides' "EFA not
detected" and "slow training" rows, found in minutes instead of a day into a run.
The workers run the image's sshd (the operator's default); the launcher needs no GPU: its pods are a pod set
of their own shape (`launcher`). Queued on a Kueue LocalQueue, the test is admitted as one gang of both pod
sets, and admission judges it like a training job (the launcher's CPU and memory need a flavor too: with GPUs
and host resources in separate resource groups, a flavor of no pool can hold them). What mpi-operator creates
from the MPIJob (its names, labels and volumes) is kubetrain.kinds.mpijob's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, InstanceOf

from constructs import Construct
from kubetrain.cluster import Cluster
from kubetrain.jobs.job_props import ByteQuantity, Dns1035Label, Dns1123Label, ImageRef
from kubetrain.kinds import mpijob
from kubetrain.kinds.mpijob import longest_names, max_name_length
from kubetrain.model.quantity import Quantity
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import GPU_RESOURCE
from kubetrain.platform.kueue_queues import LocalQueue
from kubetrain.platform.platform_construct import rejected_references
from kubetrain.rules.registry import register
from kubetrain.rules.sources import NCCL_TESTS
from kubetrain_runtime.problems import ConfigError, Problem, validate_model

NOT_A_GPU_POOL = register(
    "KT702", "error", "NCCL test on an instance type without GPUs or EFA",
    rationale="nccl-tests measures NCCL collectives between GPUs; across nodes it tells something only where EFA "
              "carries the traffic.",
    fix="name a GPU instance type with EFA interfaces (p4d, p5, p5e, p5en, p6-b200, g5/g6e large sizes)",
    source=NCCL_TESTS, targets=("mpijob",))


class LauncherResources(StrictProps):
    """What the launcher's one pod requests: it runs mpirun, no rank, so no GPU and no EFA."""

    cpu: Quantity = Field("1", description="CPU cores requested.")
    memory: ByteQuantity = Field("2Gi", description="Memory requested and limited.")


class NcclTestProps(StrictProps):
    """An NCCL benchmark across the nodes of one instance type."""

    name: Dns1035Label
    namespace: Dns1123Label | None = Field(None, description="Default: the cluster's first namespace.")
    image: ImageRef = Field(..., description="An image with nccl-tests, Open MPI and aws-ofi-nccl, e.g. AWS's "
                                             "nccl-tests image.")
    instance_type: str = Field(..., description="The GPU instance type to measure, from the cluster's catalog.")
    nodes: int = Field(2, ge=2, le=1024, description="Workers, one per node; two already cross EFA.")
    collective: Literal["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf"] = Field(
        "all_reduce_perf", description="The nccl-tests binary.")
    max_bytes: str = Field("16G", pattern=r"^([1-9][0-9]*[KMG]|[1-9][0-9]{1,})$",
                           description="Largest message (nccl-tests' -e, at least the first size, 8 bytes).")
    binary_dir: str = Field("/opt/nccl-tests/build", pattern=r"^/", description="Where the image keeps the binaries.")
    shm: ByteQuantity = Field("8Gi", description="Memory-backed /dev/shm of each worker.")
    launcher: LauncherResources = Field(default_factory=LauncherResources,
                                        description="The launcher pod's requests (a pod set of its own shape).")
    queue: InstanceOf[LocalQueue] | None = Field(None, description="The Kueue LocalQueue that admits the launcher and "
                                                                  "the workers together. Default: none, started at "
                                                                  "once.")


class NcclTest(Construct):
    """An MPIJob that runs nccl-tests across `nodes` workers of an EFA instance type."""

    def __init__(self, scope: Cluster, id: str, **props: Any):
        where = f"{scope.props.name}/{id}"
        try:
            spec = validate_model(NcclTestProps, {"name": id, **props}, where)
        except ConfigError as error:
            scope.diagnostics.report(where, error.problems)
            super().__init__(scope, f"{id}#invalid")
            return
        namespace, problems = scope.check_namespace(spec.namespace)
        problems += rejected_references(spec)  # a queue that could not be read: nothing to judge against
        longest = max_name_length(spec.nodes)
        if len(spec.name) > longest:
            derived = ", ".join(f"{what} {name!r}" for what, name in longest_names(spec.name, spec.nodes).items())
            problems.append(Problem("KT101", "name", f"{len(spec.name)} characters is too long: the MPI operator names "
                                    f"after it ({derived}), at most 63 characters each",
                                    f"shorten the name to at most {longest} characters"))
        instance = scope.instance_type(spec.instance_type)
        if instance is None:
            problems.append(Problem("KT111", "instance_type", f"unknown instance type {spec.instance_type!r}",
                                    "use a type of the instance catalog, or register yours on the Cluster"))
        elif not (instance.accelerator_resource == GPU_RESOURCE and instance.efa_interfaces):
            problems.append(Problem(NOT_A_GPU_POOL.code, "instance_type",
                                    f"{instance.name} has no {'GPUs' if not instance.accelerators else 'EFA'}",
                                    NOT_A_GPU_POOL.fix))
        problems += scope.claim(namespace, {spec.name: "name"}, f"NCCL test {spec.name}") if not problems else []
        problems += scope.attach(self, namespace, id)
        if scope.diagnostics.report(f"{scope.props.name}/{namespace}/{spec.name}", problems):
            return
        emitted = scope.add_object(mpijob.render(spec, namespace, instance, spec.queue.job_labels() if spec.queue is not None else {}))
        self.manifest: dict[str, Any] = emitted.manifest
        if spec.queue is not None:  # whether the queue admits both pod sets is judged on the whole fleet
            scope.state.admission.add_job(f"{scope.props.name}/{namespace}/{spec.name}", [emitted], [spec.queue])
