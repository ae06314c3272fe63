"""The dev cluster: CPU only, small enough that its jobs run on a laptop (`kubetrain run-local dev/tiny-gpt`)."""

from typing import Any

from kubetrain import App, Cluster, TrainingJob, k8s

NAMESPACE = "ml-dev"


def tiny_gpt_run(checkpoint_dir: str) -> dict[str, Any]:
    """A GPT small enough to train on two CPU cores, learning the synthetic stream in ~100 steps."""
    return {
        "model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
        "data": {"source": "synthetic", "seq_len": 64},
        "optimizer": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10},
        "batch": {"global_size": 16, "micro_size": 4},
        "strategy": {"name": "ddp"},
        "checkpoint": {"dir": checkpoint_dir, "interval": 10, "keep": 2},
        "max_steps": 100,
        "seed": 1234,
    }


def define(app: App) -> Cluster:
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=[NAMESPACE])
    k8s.KubePersistentVolumeClaim(cluster, "checkpoints", metadata=k8s.ObjectMeta(name="checkpoints",
                                                                                  namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadWriteMany"],
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("10Gi")})))
    pod = {
        "image": "ghcr.io/kubetrain/kubetrain:0.1.0",
        "procs_per_node": 1,
        "resources": {"cpu": "2", "memory": "4Gi", "shm": "512Mi"},
        "volumes": [{"name": "checkpoints", "claim": "checkpoints", "mount_path": "/checkpoints"}],
    }
    TrainingJob(cluster, "tiny-gpt", nodes=2, run=tiny_gpt_run("/checkpoints/tiny-gpt"), **pod)  # Master + Worker
    # Two Workers that keep training if one is lost for good: batch 16 divides at 1 and 2 ranks.
    TrainingJob(cluster, "tiny-gpt-elastic", nodes=2, elastic={"min_nodes": 1},
                run=tiny_gpt_run("/checkpoints/tiny-gpt-elastic"), **pod)
    return cluster
