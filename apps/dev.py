"""The dev cluster: CPU only, small enough that its job runs on a laptop (`kubetrain run-local dev/tiny-gpt`)."""

from kubetrain import App, Cluster, TrainingJob, k8s

NAMESPACE = "ml-dev"


def define(app: App) -> Cluster:
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=[NAMESPACE])
    k8s.KubePersistentVolumeClaim(cluster, "checkpoints", metadata=k8s.ObjectMeta(name="checkpoints",
                                                                                  namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadWriteMany"],
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("10Gi")})))
    TrainingJob(
        cluster, "tiny-gpt",
        image="ghcr.io/kubetrain/kubetrain:0.1.0",
        nodes=2,  # a Master and one Worker
        procs_per_node=1,
        resources={"cpu": "2", "memory": "4Gi", "shm": "512Mi"},
        volumes=[{"name": "checkpoints", "claim": "checkpoints", "mount_path": "/checkpoints"}],
        run={
            "model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
            "data": {"source": "synthetic", "seq_len": 64},
            "optimizer": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10},
            "batch": {"global_size": 16, "micro_size": 4},
            "strategy": {"name": "ddp"},
            "checkpoint": {"dir": "/checkpoints/tiny-gpt", "interval": 10, "keep": 2},
            "max_steps": 100,
            "seed": 1234,
        },
    )
    return cluster
