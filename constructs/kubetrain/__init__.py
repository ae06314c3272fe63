"""kubetrain: distributed PyTorch training on Kubernetes, declared as typed cdk8s constructs.

    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, "tiny", image=..., nodes=2, procs_per_node=1, resources={...}, run={...})
    kubetrain.synth(app, "dist")
"""

from kubetrain.node_runtime import use_wheel_node

use_wheel_node()  # before anything imports cdk8s, which starts Node

from cdk8s import App  # noqa: E402
from cdk8s_plus_33 import k8s  # noqa: E402

from kubetrain.cluster import Cluster, ClusterProps  # noqa: E402
from kubetrain.job_props import NodeResources, TrainingJobProps, VolumeProps  # noqa: E402
from kubetrain.manifests import synth  # noqa: E402
from kubetrain.training_job import TrainingJob  # noqa: E402
from training.config import RunConfig  # noqa: E402
from training.problems import ConfigError, Problem  # noqa: E402

# App and k8s are re-exported so a fleet module can import everything from kubetrain, which
# must be imported before cdk8s (see node_runtime).
__all__ = [
    "App", "Cluster", "k8s", "ClusterProps", "ConfigError", "NodeResources", "Problem", "RunConfig", "TrainingJob",
    "TrainingJobProps", "VolumeProps", "synth",
]
