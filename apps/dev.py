"""The dev cluster: CPU only, small enough that its jobs run on a laptop (`kubetrain run-local dev/tiny-gpt`)."""

from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    Command,
    Elastic,
    Function,
    IndexedJob,
    NodeResources,
    PyTorchJob,
    RunConfig,
    Trainer,
    TrainingJob,
    TrainingJobProps,
    k8s,
)

from examples.ddp_function import train_regression
from examples.fashion_mnist import train_fashion_mnist

NAMESPACE = "ml-dev"
IMAGE = "ghcr.io/kubetrain/kubetrain:0.1.0"  # this repository's image: training/ and examples/


def tiny_gpt_run(checkpoint_dir: str) -> RunConfig:
    """A GPT small enough to train on two CPU cores, learning the synthetic stream in ~100 steps."""
    return RunConfig.model_validate({
        "model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
        "data": {"source": "synthetic", "seq_len": 64},
        "optimizer": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 10},
        "batch": {"global_size": 16, "micro_size": 4},
        "strategy": {"name": "ddp"},
        # Durable checkpoints every 10 steps on the claim; a fast tier every 5 on the node's disk.
        "checkpoint": {"dir": checkpoint_dir, "interval": 10, "keep": 2, "local_dir": "/var/kubetrain/checkpoints",
                       "local_interval": 5},
        "max_steps": 100,
        "seed": 1234,
    })


def define(app: App) -> Cluster:
    # Every change to a job is a new run (create-once): Argo CD creates it and prunes the old one.
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=[NAMESPACE], run_names="content-hash")
    k8s.KubePersistentVolumeClaim(cluster, "checkpoints", metadata=k8s.ObjectMeta(name="checkpoints",
                                                                                  namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadWriteMany"],
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("10Gi")})))
    checkpoints = ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")
    laptop = NodeResources(cpu="2", memory="4Gi", shm="512Mi")

    # Two pods, one rank each, as a Kubeflow Trainer v2 TrainJob (the default target) on a TrainingRuntime.
    TrainingJob(cluster, "tiny-gpt", TrainingJobProps(
        name="tiny-gpt", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop, volumes=[checkpoints],
        workload=Trainer(run=tiny_gpt_run("/checkpoints/tiny-gpt"))))
    # Two Workers that keep training if one is lost for good (batch 16 divides at 1 and 2 ranks): elastic
    # membership is the training operator v1's PyTorchJob.
    TrainingJob(cluster, "tiny-gpt-elastic", TrainingJobProps(
        name="tiny-gpt-elastic", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop, volumes=[checkpoints],
        target=PyTorchJob(), elastic=Elastic(min_nodes=1),
        workload=Trainer(run=tiny_gpt_run("/checkpoints/tiny-gpt-elastic"))))
    # The same job on the other launch targets: a PyTorchJob (a Master and a Worker), and a plain Indexed Job
    # for clusters without a training operator.
    for name, target in (("tiny-gpt-pytorchjob", PyTorchJob()), ("tiny-gpt-indexed", IndexedJob())):
        TrainingJob(cluster, name, TrainingJobProps(
            name=name, image=IMAGE, nodes=2, procs_per_node=1, resources=laptop, volumes=[checkpoints],
            target=target, workload=Trainer(run=tiny_gpt_run(f"/checkpoints/{name}"))))
    # Fine-tuning a Hugging Face Llama-style model (a tiny one: two CPU cores) on a parquet data set with the
    # model's own tokenizer, both read from a claim mounted read-only; the weights come back in save_pretrained
    # layout under /checkpoints/tiny-llama-sft/hf/step-N.
    k8s.KubePersistentVolumeClaim(cluster, "datasets", metadata=k8s.ObjectMeta(name="datasets", namespace=NAMESPACE),
                                  spec=k8s.PersistentVolumeClaimSpec(
                                      access_modes=["ReadOnlyMany"],
                                      resources=k8s.VolumeResourceRequirements(
                                          requests={"storage": k8s.Quantity.from_string("10Gi")})))
    datasets = ClaimVolume(name="datasets", claim="datasets", mount_path="/datasets", read_only=True)
    TrainingJob(cluster, "tiny-llama-sft", TrainingJobProps(
        name="tiny-llama-sft", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop,
        volumes=[checkpoints, datasets],
        workload=Trainer(run=RunConfig.model_validate({
            "model": {"kind": "hf", "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                      "vocab_size": 512, "pretrained_path": "/datasets/models/tiny-llama"},
            "data": {"source": "parquet", "path": "/datasets/text/tiny-stories", "text_field": "text",
                     "tokenizer": "/datasets/models/tiny-llama", "seq_len": 64},
            "optimizer": {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 5},
            "batch": {"global_size": 8, "micro_size": 4},
            "strategy": {"name": "fsdp"},
            "checkpoint": {"dir": "/checkpoints/tiny-llama-sft", "interval": 10, "keep": 2},
            "max_steps": 40,
            "seed": 1234,
        }))))
    # The user's own torchrun script: kubetrain writes torchrun's flags and appends the command; the script's
    # kubetrain_runtime.Run checkpoints to checkpoint_dir, which the launcher passes in KUBETRAIN_CHECKPOINT_DIR.
    TrainingJob(cluster, "ddp-minimal", TrainingJobProps(
        name="ddp-minimal", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop, volumes=[checkpoints],
        workload=Command(command=["examples/ddp_minimal.py", "--steps", "20"], checkpoint_dir="/checkpoints/ddp-minimal")))
    # The same loop as a training function whose `run` parameter the launcher fills with kubetrain_runtime.Run.
    TrainingJob(cluster, "ddp-function", TrainingJobProps(
        name="ddp-function", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop, volumes=[checkpoints],
        workload=Function(train_regression, kwargs={"steps": 20}, checkpoint_dir="/checkpoints/ddp-function")))
    # The Kubeflow Trainer guide's training function, captured at synth: the ConfigMap holds its source.
    TrainingJob(cluster, "fashion-mnist", TrainingJobProps(
        name="fashion-mnist", image=IMAGE, nodes=2, procs_per_node=1, resources=laptop,
        workload=Function(train_fashion_mnist, kwargs={"epochs": 3, "batch_size": 32, "synthetic": 512})))
    return cluster
