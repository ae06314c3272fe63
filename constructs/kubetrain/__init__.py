"""kubetrain: distributed PyTorch training on Kubernetes, declared as typed cdk8s constructs.

    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, "tiny", TrainingJobProps(image=..., nodes=2, procs_per_node=1,
                                              resources=NodeResources(cpu="2", memory="4Gi"),
                                              workload=Trainer(run=RunConfig(...))))
    kubetrain.synth(app, "dist")

The names below load on first use, so `kubetrain validate` and other commands that need no cdk8s
never start its Node.js process.
"""

from __future__ import annotations

import importlib
from typing import Any

from kubetrain.node_runtime import use_wheel_node

use_wheel_node()  # before anything imports cdk8s, which starts Node

# name -> module it lives in. JsonPatch and k8s are re-exported so a fleet module can import
# everything from kubetrain.
_EXPORTS = {
    "App": "kubetrain.app", "JsonPatch": "cdk8s", "k8s": "cdk8s_plus_33",
    "Cluster": "kubetrain.cluster", "ClusterProps": "kubetrain.cluster",
    "supported_kubernetes_versions": "kubetrain.validation.validate",
    **{name: "kubetrain.jobs.job_props" for name in (
        "ClaimVolume", "Command", "CommandModel", "ConfigMapVolume", "Elastic", "EmptyDirVolume", "NodeResources",
        "Parallelism", "PodSettings", "SecretVolume", "SecurityContext", "Trainer", "TrainingJobProps")},
    "TrainingJob": "kubetrain.jobs.training_job", "Function": "kubetrain.jobs.function",
    "PipIndexSecret": "kubetrain.jobs.function",
    "NcclTest": "kubetrain.jobs.nccl_test", "LauncherResources": "kubetrain.jobs.nccl_test",
    "ArgoCd": "kubetrain.gitops.argocd_construct", "ArgoCdProps": "kubetrain.gitops.argocd_props",
    "Destination": "kubetrain.gitops.argocd_props",
    "Estimate": "kubetrain.cost.cost_props", "PoolPricing": "kubetrain.cost.cost_props",
    "InstanceType": "kubetrain.model.instances",
    "EfaNodePool": "kubetrain.platform.node_pools", "GpuNodePool": "kubetrain.platform.node_pools",
    "CpuNodePool": "kubetrain.platform.node_pools",
    "NcclProfile": "kubetrain.model.efa", "NcclDebug": "kubetrain.model.efa",
    "FsxLustre": "kubetrain.platform.storage", "Efs": "kubetrain.platform.storage", "S3Bucket": "kubetrain.platform.storage",
    **{name: "kubetrain.platform.kueue_queues" for name in ("Topology", "ResourceFlavor", "Cohort", "ClusterQueue",
                                                     "LocalQueue", "Quota", "ResourceGroup")},
    "VolcanoQueue": "kubetrain.platform.volcano_queues", "TopologyPlacement": "kubetrain.platform.queues",
    "DcgmExporter": "kubetrain.platform.gpu_monitoring", "TrainingPodMonitor": "kubetrain.platform.gpu_monitoring",
    **{name: "kubetrain.platform.alerts" for name in (
        "TrainingAlerts", "StalledRunAlert", "RestartAlert", "EttrAlert", "MfuDropAlert", "StaleCheckpointAlert",
        "FailedRunAlert", "GpuAlert")},
    "PodSecurity": "kubetrain.platform.security",
    "PriorityClass": "kubetrain.platform.scheduling", "Toleration": "kubetrain.platform.scheduling",
    "ServiceAccount": "kubetrain.platform.identity",
    **{name: "kubetrain.jobs.containers" for name in ("Exec", "HttpGet", "InitContainer", "Probe", "TcpSocket",
                                                      "VolumeMount")},
    "synth": "kubetrain.pipeline", "add_crds": "kubetrain.pipeline",
    "PyTorchJob": "kubetrain.kinds.pytorchjob", "Target": "kubetrain.kinds.target",
    "TrainJob": "kubetrain.kinds.trainjob", "IndexedJob": "kubetrain.kinds.indexed_job",
    "RunConfig": "training.config",
    "ConfigError": "kubetrain_runtime.problems", "Problem": "kubetrain_runtime.problems",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
