"""The prod cluster: a p5.48xlarge EFA pool (8 x H100, 32 EFA interfaces each) over a 16-instance capacity
reservation and a CPU pool, FSx for Lustre for checkpoints and token files, an S3 data set, Kueue with
topology-aware placement, and DCGM.

Jobs shaped like AWS's EKS distributed-training examples: kubetrain's FSDP trainer, and Megatron-LM as a command
job (TP=2, PP=1, global batch 512, micro batch 2); and a fine-tune of a Hugging Face Llama from FSx on a parquet
data set in S3. Both run on the p5 pool through the `training`
queue, packed into one EC2 network layer; each pod gets every GPU and EFA interface of its node,
huge pages for the EFA driver, a memory-backed /dev/shm, and the NCCL environment kubetrain chooses
for aws-ofi-nccl >= 1.7. The pool's 128 GPUs are split between two queues of one cohort, `training`
(112) and `research` (16), which lend each other what they leave unused: the research ablation needs 32,
so it runs only by borrowing (`kubetrain plan` shows it as `borrows`, synth warns with KT442).
Subnets, security groups, the node role and the file system are this account's; replace them with yours.
"""

from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    ClusterQueue,
    Cohort,
    Command,
    CpuNodePool,
    DcgmExporter,
    EfaNodePool,
    Estimate,
    FsxLustre,
    LocalQueue,
    NcclProfile,
    NcclTest,
    NodeResources,
    Parallelism,
    PodSecurity,
    ResourceFlavor,
    RunConfig,
    S3Bucket,
    Topology,
    TopologyPlacement,
    Trainer,
    TrainingAlerts,
    TrainingJob,
    TrainingJobProps,
    TrainingPodMonitor,
)

NAMESPACE = "ml-prod"
P5 = "p5.48xlarge"
# Per pod: most of a p5.48xlarge's CPU and memory. Its 8 GPUs, 32 EFA interfaces, huge pages and /dev/shm
# come from the pool.
P5_NODE = NodeResources(cpu="184", memory="1800Gi")


def define(app: App) -> Cluster:
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=[NAMESPACE], run_names="content-hash")
    p5 = EfaNodePool(cluster, "p5", instance_types=[P5], zones=["us-west-2a"], subnet_ids=["subnet-0abc1234"],
                     security_group_ids=["sg-0efa1234"], role="KarpenterNodeRole-prod", capacity_type="reserved",
                     capacity_reservation_ids=["cr-0123456789abcdef0"], reserved_nodes=16, max_nodes=16,
                     static_nodes=16)
    cpu = CpuNodePool(cluster, "cpu", instance_types=["m5.4xlarge", "c5.4xlarge"], zones=["us-west-2a", "us-west-2b"],
                      subnet_ids=["subnet-0abc1234", "subnet-0def5678"], security_group_ids=["sg-0c0de123"],
                      role="KarpenterNodeRole-prod", max_nodes=20)
    fsx = FsxLustre(cluster, "fsx", namespace=NAMESPACE, file_system_id="fs-0123456789abcdef0",
                    dns_name="fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", mount_name="abcdefgh",
                    capacity_gib=4800)
    datasets = S3Bucket(cluster, "datasets", namespace=NAMESPACE, bucket_name="corp-datasets", region="us-west-2")
    topology = Topology(cluster, "eks-network")
    p5_flavor = ResourceFlavor(cluster, "p5", pool=p5, topology=topology)
    # Production training holds 14 nodes' GPUs, research 2; each borrows what the other leaves unused.
    org = Cohort(cluster, "org")
    training = ClusterQueue(cluster, "training", flavors=[p5_flavor, ResourceFlavor(cluster, "cpu", pool=cpu)],
                            cohort=org, quotas={"p5": {"nvidia.com/gpu": "112"}})
    research = ClusterQueue(cluster, "research", flavors=[p5_flavor], cohort=org,
                            quotas={"p5": {"nvidia.com/gpu": "16"}})
    queue = LocalQueue(cluster, "training", namespace=NAMESPACE, cluster_queue=training)
    research_queue = LocalQueue(cluster, "research", namespace=NAMESPACE, cluster_queue=research)
    dcgm = DcgmExporter(cluster, "dcgm-exporter", pools=[p5])
    monitor = TrainingPodMonitor(cluster, "training", namespace=NAMESPACE)
    # Hangs, crash loops, ETTR and MFU drops, stale checkpoints, failed runs, and GPU trouble by node.
    TrainingAlerts(cluster, "training-alerts", monitor=monitor, dcgm=dcgm)
    PodSecurity(cluster)

    # What the images ship decides the NCCL/EFA environment (kubetrain.model.efa).
    stack = NcclProfile(aws_ofi_nccl="1.14.0", nccl="2.26.2")
    on_p5 = {"pool": p5, "queue": queue, "nccl": stack, "resources": P5_NODE, "nodes": 2, "procs_per_node": 8,
             "placement": TopologyPlacement(level="topology.k8s.aws/network-node-layer-3", mode="required"),
             "volumes": [ClaimVolume(name="fsx", claim=fsx, mount_path="/fsx"),
                         ClaimVolume(name="datasets", claim=datasets, mount_path="/datasets", read_only=True)]}
    def gpt_1b(name: str, lr: float, min_lr: float) -> RunConfig:
        return RunConfig.model_validate({
            "model": {"vocab_size": 50304, "dim": 2048, "n_layers": 24, "n_heads": 16},
            "data": {"source": "tokens", "path": "/fsx/data/fineweb-edu-10b.bin", "seq_len": 2048},
            "optimizer": {"lr": lr, "min_lr": min_lr, "warmup_steps": 2000},
            "batch": {"global_size": 512, "micro_size": 4},
            "strategy": {"name": "fsdp", "activation_checkpointing": True, "compile": True},
            "precision": "bf16",
            "checkpoint": {"dir": f"/fsx/checkpoints/{name}", "interval": 500, "keep": 3, "async_save": True},
            "max_steps": 20000,
            "seed": 1234,
        })

    TrainingJob(cluster, "gpt-1b-fsdp", TrainingJobProps(
        name="gpt-1b-fsdp", image="ghcr.io/kubetrain/kubetrain:0.1.0", env={"NCCL_DEBUG": "WARN"}, **on_p5,
        workload=Trainer(run=gpt_1b("gpt-1b-fsdp", 3e-4, 3e-5))))
    # A learning-rate ablation on the research queue: 4 nodes (32 GPUs) against its 16, the rest borrowed.
    TrainingJob(cluster, "gpt-1b-lr-ablation", TrainingJobProps(
        name="gpt-1b-lr-ablation", image="ghcr.io/kubetrain/kubetrain:0.1.0", env={"NCCL_DEBUG": "WARN"},
        **{**on_p5, "queue": research_queue, "nodes": 4}, workload=Trainer(run=gpt_1b("gpt-1b-lr-ablation", 6e-4, 6e-5))))

    # Fine-tuning a Hugging Face model: Llama 3.2 1B's safetensors and tokenizer, copied to FSx once (the pods
    # never reach the hub), on a chat data set kept as parquet in the S3 bucket (mounted read-only). The shape is
    # stated in the run config, so that synth sizes the job; the pod checks it against the checkpoint's
    # config.json before torchrun starts. The weights come back in save_pretrained layout under export_dir.
    # --8<-- [start:llama-sft] (the lines docs/guides/huggingface.md shows)
    llama = "/fsx/models/llama-3.2-1b"
    TrainingJob(cluster, "llama-3-2-1b-sft", TrainingJobProps(
        name="llama-3-2-1b-sft", image="ghcr.io/kubetrain/kubetrain:0.1.0", env={"NCCL_DEBUG": "WARN"},
        **{**on_p5, "nodes": 1},
        workload=Trainer(run=RunConfig.model_validate({
            "model": {"kind": "hf", "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
                      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
                      "vocab_size": 128256, "tie_word_embeddings": True, "pretrained_path": llama,
                      "export_dir": "/fsx/models/llama-3.2-1b-sft"},
            "data": {"source": "parquet", "path": "/datasets/sft/ultrachat-200k/train", "text_field": "text",
                     "tokenizer": llama, "seq_len": 4096},
            "optimizer": {"lr": 2e-5, "min_lr": 2e-6, "warmup_steps": 100, "weight_decay": 0.0},
            "batch": {"global_size": 64, "micro_size": 4},
            "strategy": {"name": "fsdp", "activation_checkpointing": True, "compile": True},
            "precision": "bf16",
            "checkpoint": {"dir": "/fsx/checkpoints/llama-3-2-1b-sft", "interval": 200, "keep": 2,
                           "async_save": True},
            "max_steps": 3000,
            "seed": 1234,
        }))))
    # --8<-- [end:llama-sft]

    # Megatron-LM's GPT pretraining, as AWS's EKS examples run it: torchrun's flags come from the
    # TrainJob contract, the script and its arguments are Megatron's own.
    checkpoints = "/fsx/checkpoints/megatron-gpt"
    TrainingJob(cluster, "megatron-gpt", TrainingJobProps(
        name="megatron-gpt", image="nvcr.io/nvidia/pytorch:25.04-py3",
        env={"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}, **on_p5,
        workload=Command(
            command=["/workspace/megatron-lm/pretrain_gpt.py",
                     "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "1",
                     "--micro-batch-size", "2", "--global-batch-size", "512",
                     "--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
                     "--seq-length", "2048", "--max-position-embeddings", "2048",
                     "--train-iters", "20000", "--lr", "3e-4", "--min-lr", "3e-5", "--lr-decay-style", "cosine",
                     "--bf16", "--use-distributed-optimizer",
                     "--data-path", "/datasets/fineweb-edu-10b_text_document",
                     "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "/datasets/gpt2-vocab.json",
                     "--merge-file", "/datasets/gpt2-merges.txt",
                     "--save", checkpoints, "--load", checkpoints, "--save-interval", "500",
                     # The collective timeout Megatron passes to init_process_group (NCCL_TIMEOUT does nothing).
                     "--distributed-timeout-minutes", "30"],
            parallelism=Parallelism(tensor=2, pipeline=1, micro_batch=2, global_batch=512),
            checkpoint_dir=checkpoints),
        # What it trains, for `kubetrain cost`: the arguments above (Megatron pads GPT-2's vocabulary to 50,304).
        estimate=Estimate(model={"vocab_size": 50304, "dim": 2048, "n_layers": 24, "n_heads": 16},
                          steps=20000, global_batch=512, seq_len=2048)))

    # Before a long run: does EFA carry the bandwidth it should? Compare the launcher's
    # "# Avg bus bandwidth" line with the job's kubetrain.dev/expected-busbw-gbytes annotation.
    NcclTest(cluster, "nccl-allreduce-p5", image="public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.40.0-ofiv1.15.0",
             instance_type=P5, nodes=2)
    return cluster
