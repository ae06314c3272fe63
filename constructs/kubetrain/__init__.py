"""kubetrain: distributed PyTorch training on Kubernetes, declared as typed cdk8s constructs.

    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, "tiny", TrainingJobProps(image=..., nodes=2, procs_per_node=1,
                                              resources=NodeResources(cpu="2", memory="4Gi"),
                                              workload=Trainer(run=RunConfig(...))))
    kubetrain.synth(app, "dist")
"""

from kubetrain.node_runtime import use_wheel_node

use_wheel_node()  # before anything imports cdk8s, which starts Node

from cdk8s import App, JsonPatch  # noqa: E402
from cdk8s_plus_33 import k8s  # noqa: E402

from kubetrain.cluster import Cluster, ClusterProps, supported_kubernetes_versions  # noqa: E402
from kubetrain.jobs.props import (  # noqa: E402
    ClaimVolume,
    Command,
    ConfigMapVolume,
    Elastic,
    EmptyDirVolume,
    NodeResources,
    Parallelism,
    PodSettings,
    SecretVolume,
    SecurityContext,
    Toleration,
    Trainer,
    TrainingJobProps,
)
from kubetrain.jobs.training_job import TrainingJob  # noqa: E402
from kubetrain.manifests import synth  # noqa: E402
from kubetrain.targets import PyTorchJob, Target  # noqa: E402
from training.config import RunConfig  # noqa: E402
from training.problems import ConfigError, Problem  # noqa: E402

# App, JsonPatch and k8s are re-exported so a fleet module can import everything from kubetrain,
# which must be imported before cdk8s (see node_runtime).
__all__ = [
    "App", "ClaimVolume", "Cluster", "ClusterProps", "Command", "ConfigError", "ConfigMapVolume", "Elastic",
    "EmptyDirVolume", "JsonPatch", "NodeResources", "Parallelism", "PodSettings", "Problem", "PyTorchJob", "RunConfig",
    "SecretVolume", "SecurityContext", "Target", "Toleration", "Trainer", "TrainingJob", "TrainingJobProps", "k8s",
    "supported_kubernetes_versions", "synth",
]
