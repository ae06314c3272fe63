"""The prod cluster: FSDP on p5.48xlarge (8 x H100, 32 EFA interfaces per node).

Shaped like the seeds' Megatron-on-EKS example: every GPU and EFA interface of the node, huge
pages for the EFA driver, a memory-backed /dev/shm, and the NCCL environment kubetrain.nccl
chooses for aws-ofi-nccl >= 1.7.
"""

from kubetrain import App, Cluster, TrainingJob, k8s

NAMESPACE = "ml-prod"


def define(app: App) -> Cluster:
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=[NAMESPACE])
    # FSx for Lustre, provisioned by the FSx CSI driver's StorageClass.
    k8s.KubePersistentVolumeClaim(cluster, "fsx", metadata=k8s.ObjectMeta(name="fsx", namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadWriteMany"], storage_class_name="fsx-lustre",
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("4800Gi")})))
    TrainingJob(
        cluster, "gpt-1b-fsdp",
        image="ghcr.io/kubetrain/kubetrain:0.1.0",
        nodes=2,
        procs_per_node=8,
        instance_type="p5.48xlarge",
        resources={"cpu": "184", "memory": "1800Gi", "gpus": 8, "efa": 32, "shm": "256Gi"},
        env={"NCCL_DEBUG": "WARN"},
        volumes=[{"name": "fsx", "claim": "fsx", "mount_path": "/fsx"}],
        run={
            "model": {"vocab_size": 50304, "dim": 2048, "n_layers": 24, "n_heads": 16},
            "data": {"source": "tokens", "path": "/fsx/data/fineweb-edu-10b.bin", "seq_len": 2048},
            "optimizer": {"lr": 3e-4, "min_lr": 3e-5, "warmup_steps": 2000},
            "batch": {"global_size": 512, "micro_size": 4},
            "strategy": {"name": "fsdp", "activation_checkpointing": True, "compile": True},
            "precision": "bf16",
            "checkpoint": {"dir": "/fsx/checkpoints/gpt-1b-fsdp", "interval": 500, "keep": 3, "async_save": True},
            "max_steps": 20000,
            "seed": 1234,
        },
    )
    return cluster
