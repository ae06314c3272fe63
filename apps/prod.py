"""The prod cluster: p5.48xlarge nodes (8 x H100, 32 EFA interfaces each) on FSx for Lustre.

Two jobs, shaped like the seeds' EKS examples: kubetrain's FSDP trainer, and Megatron-LM as a
command job (TP=2, PP=1, global batch 512, micro batch 2). Both get every GPU and EFA interface of
the node, huge pages for the EFA driver, a memory-backed /dev/shm, and the NCCL environment
kubetrain.nccl chooses for aws-ofi-nccl >= 1.7.
"""

from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    Command,
    NcclTest,
    NodeResources,
    Parallelism,
    RunConfig,
    Trainer,
    TrainingJob,
    TrainingJobProps,
    k8s,
)

NAMESPACE = "ml-prod"
P5 = "p5.48xlarge"
# Per pod: all 8 GPUs and 32 EFA interfaces of a p5.48xlarge, and most of its CPU and memory.
P5_NODE = NodeResources(cpu="184", memory="1800Gi", accelerators=8, efa=32, shm="256Gi")


def define(app: App) -> Cluster:
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=[NAMESPACE])
    # FSx for Lustre, provisioned by the FSx CSI driver's StorageClass.
    k8s.KubePersistentVolumeClaim(cluster, "fsx", metadata=k8s.ObjectMeta(name="fsx", namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadWriteMany"], storage_class_name="fsx-lustre",
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("4800Gi")})))
    fsx = ClaimVolume(name="fsx", claim="fsx", mount_path="/fsx")

    TrainingJob(cluster, "gpt-1b-fsdp", TrainingJobProps(
        name="gpt-1b-fsdp", image="ghcr.io/kubetrain/kubetrain:0.1.0", nodes=2, procs_per_node=8,
        instance_type=P5, resources=P5_NODE, env={"NCCL_DEBUG": "WARN"}, volumes=[fsx],
        workload=Trainer(run=RunConfig.model_validate({
            "model": {"vocab_size": 50304, "dim": 2048, "n_layers": 24, "n_heads": 16},
            "data": {"source": "tokens", "path": "/fsx/data/fineweb-edu-10b.bin", "seq_len": 2048},
            "optimizer": {"lr": 3e-4, "min_lr": 3e-5, "warmup_steps": 2000},
            "batch": {"global_size": 512, "micro_size": 4},
            "strategy": {"name": "fsdp", "activation_checkpointing": True, "compile": True},
            "precision": "bf16",
            "checkpoint": {"dir": "/fsx/checkpoints/gpt-1b-fsdp", "interval": 500, "keep": 3, "async_save": True},
            "max_steps": 20000,
            "seed": 1234,
        }))))

    # Megatron-LM's GPT pretraining, as the seed guide runs it: torchrun's flags come from the
    # PyTorchJob contract, the script and its arguments are Megatron's own.
    checkpoints = "/fsx/checkpoints/megatron-gpt"
    TrainingJob(cluster, "megatron-gpt", TrainingJobProps(
        name="megatron-gpt", image="nvcr.io/nvidia/pytorch:25.04-py3", nodes=2, procs_per_node=8,
        instance_type=P5, resources=P5_NODE, env={"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"},
        volumes=[fsx],
        workload=Command(
            command=["/workspace/megatron-lm/pretrain_gpt.py",
                     "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "1",
                     "--micro-batch-size", "2", "--global-batch-size", "512",
                     "--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
                     "--seq-length", "2048", "--max-position-embeddings", "2048",
                     "--train-iters", "20000", "--lr", "3e-4", "--min-lr", "3e-5", "--lr-decay-style", "cosine",
                     "--bf16", "--use-distributed-optimizer",
                     "--data-path", "/fsx/data/fineweb-edu-10b_text_document",
                     "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "/fsx/data/gpt2-vocab.json",
                     "--merge-file", "/fsx/data/gpt2-merges.txt",
                     "--save", checkpoints, "--load", checkpoints, "--save-interval", "500",
                     # The collective timeout Megatron passes to init_process_group (NCCL_TIMEOUT does nothing).
                     "--distributed-timeout-minutes", "30"],
            parallelism=Parallelism(tensor=2, pipeline=1, micro_batch=2, global_batch=512),
            checkpoint_dir=checkpoints)))
    # Before a long run: does EFA carry the bandwidth it should? Compare the launcher's
    # "# Avg bus bandwidth" line with the job's kubetrain.dev/expected-busbw-gbytes annotation.
    NcclTest(cluster, "nccl-allreduce-p5", image="public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.40.0-ofiv1.15.0",
             instance_type=P5, nodes=2)
    return cluster
