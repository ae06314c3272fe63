"""Every rule: a definition that breaks it and one that passes, and the registry that documents them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import ROOT, kubetrain
from kubetrain import (
    App,
    Cluster,
    ClusterQueue,
    CpuNodePool,
    IndexedJob,
    LocalQueue,
    PriorityClass,
    PyTorchJob,
    ResourceFlavor,
    ServiceAccount,
    TrainingJob,
)
from kubetrain.pipeline import fleet_findings
from kubetrain.rules.catalog import every_rule

RUN = {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 10, "optimizer": {"warmup_steps": 1},
       "checkpoint": {"dir": "/ckpt/run"}}
CKPT = {"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}
P5 = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge",
      "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32}, "volumes": [CKPT],
      "workload": {"kind": "trainer", "run": RUN}}
SCRATCH = {"name": "scratch", "empty_dir": "disk", "mount_path": "/scratch"}
CPU = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "resources": {"cpu": "2", "memory": "4Gi"},
       "volumes": [CKPT], "workload": {"kind": "trainer", "run": {**RUN, "batch": {"global_size": 4, "micro_size": 1}}}}


# Platform objects of a cluster named like the one findings() builds ("c", namespace "ml"), and of another cluster.
_C = Cluster(App(), "c", kubernetes_version="1.33", namespaces=["ml", "lab"])
ROLE = "arn:aws:iam::111122223333:role/training"
IRSA = ServiceAccount(_C, "trainer", namespace="ml", iam_role_arn=ROLE)
LAB = ServiceAccount(_C, "lab", namespace="lab", iam_role_arn=ROLE)
HIGH = PriorityClass(Cluster(App(), "other", kubernetes_version="1.33", namespaces=["ml"]), "high", value=1000)
PROBE = {"http_get": {"port": "metrics", "path": "/metrics"}}


def command(words: list[str], **fields: Any) -> dict[str, Any]:
    return {**P5, "workload": {"kind": "command", "command": words, **fields}}


def megatron(**parallelism: int) -> dict[str, Any]:
    return {**P5, "workload": {"kind": "command", "command": ["pretrain_gpt.py"],
                               "parallelism": {"tensor": 2, "micro_batch": 2, "global_batch": 512, **parallelism}}}


# A Llama-style model as Megatron-LM's flags and as a CommandModel say it (KT165 compares them).
LLAMA_FLAGS = ["pretrain_gpt.py", "--num-layers", "16", "--hidden-size", "2048", "--num-attention-heads", "16",
               "--ffn-hidden-size", "5632", "--swiglu", "--seq-length", "2048", "--micro-batch-size", "1",
               "--vocab-size", "32000", "--bf16"]
LLAMA_MODEL = {"layers": 16, "hidden": 2048, "heads": 16, "ffn": 5632, "vocab": 32000, "seq_len": 2048}


def findings(props: dict[str, Any], name: str = "job") -> list[tuple[str, str]]:
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    if props.get("queue") == "KUEUE":  # a Kueue LocalQueue over a CPU pool that holds the job
        pool = CpuNodePool(cluster, "cpu", instance_types=["m5.4xlarge"], zones=["us-west-2a"],
                           subnet_ids=["subnet-00000001"], security_group_ids=["sg-00000001"], role="NodeRole",
                           max_nodes=4)
        queue = ClusterQueue(cluster, "q", flavors=[ResourceFlavor(cluster, "cpu", pool=pool)])
        props = {**props, "pool": pool, "queue": LocalQueue(cluster, "q", cluster_queue=queue)}
    TrainingJob(cluster, name, props)
    return [(f.problem.code, f.problem.path) for f in fleet_findings(app)]


def with_env(base: dict, **env: str) -> dict:
    return {**base, "env": env}


def run(base: dict, **changes: Any) -> dict:
    return {**base, "workload": {"kind": "trainer", "run": {**base["workload"]["run"], **changes}}}


def pod(base: dict, **settings: Any) -> dict:
    return {**base, "pod": settings}


NODE_TERMS = "pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
TERM = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}]}


def node_affinity(terms: list[dict]) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


# (code, a definition that breaks the rule, the field it names, a definition that passes)
CASES = [
    ("KT101", {**CPU, "nodes": 1}, "name", CPU),  # with the long name below
    ("KT102", {**P5, "procs_per_node": 16, "resources": {**P5["resources"], "accelerators": 16}},
     "resources.accelerators", P5),
    ("KT103", {**P5, "resources": {**P5["resources"], "efa": 33}}, "resources.efa", P5),
    ("KT104", {**P5, "procs_per_node": 4}, "procs_per_node", P5),
    ("KT105", with_env(CPU, WORLD_SIZE="4"), "env.WORLD_SIZE", with_env(CPU, MY_WORLD="4")),
    ("KT105", with_env(CPU, PET_NNODES="2"), "env.PET_NNODES", CPU),
    ("KT105", with_env(P5, CUDA_VISIBLE_DEVICES="0"), "env.CUDA_VISIBLE_DEVICES",
     with_env(CPU, CUDA_VISIBLE_DEVICES="")),
    ("KT105", with_env(CPU, KUBETRAIN_RUN_CONFIG="/tmp/run.yaml"), "env.KUBETRAIN_RUN_CONFIG",
     with_env(CPU, KUBETRAIN_NOTE="x")),
    ("KT170", with_env(CPU, NCCL_DEBUG="INFOS"), "env.NCCL_DEBUG", with_env(CPU, NCCL_DEBUG="info")),
    ("KT170", with_env(P5, NCCL_DEBUG_SUBSYS="INIT,NETWORK"), "env.NCCL_DEBUG_SUBSYS",
     with_env(P5, NCCL_DEBUG_SUBSYS="^init,coll")),
    ("KT171", with_env(P5, NCCL_DEBUG_FILE="/tmp/nccl.%h.%p.log"), "env.NCCL_DEBUG_FILE",
     with_env(P5, NCCL_DEBUG_FILE="/ckpt/nccl/%h.%p.log")),
    ("KT171", with_env(P5, NCCL_DEBUG_FILE="/ckpt/nccl.%h.log"), "env.NCCL_DEBUG_FILE",
     {**P5, "nccl": {"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2", "debug": {"log_dir": "/ckpt/nccl"}}}),
    ("KT171", {**P5, "nccl": {"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2", "debug": {"log_dir": "/var/log"}}},
     "nccl.debug.log_dir", {**P5, "nccl": {"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2", "debug": {"level": "WARN"}}}),
    ("KT173", command(["train.py"], profile={"output_dir": "/tmp/profiles"}), "workload.profile.output_dir",
     command(["train.py"], profile={"output_dir": "/ckpt/profiles", "ranks": [0, 15]})),
    ("KT140", command(["nsys", "profile", "train.py"]), "workload.command.0",
     command(["train.py"], profile={"output_dir": "/ckpt/profiles"})),
    ("KT006", with_env(CPU, KUBETRAIN_FAULT="crash:step=3:rnk=1"), "env.KUBETRAIN_FAULT",
     with_env(CPU, KUBETRAIN_FAULT="crash:step=3:rank=1")),
    ("KT172", with_env(CPU, KUBETRAIN_FAULT="crash:step=3:rank=2"), "env.KUBETRAIN_FAULT",
     with_env(CPU, KUBETRAIN_FAULT="hang:step=10;nan:step=2:rank=0")),
    ("KT172", with_env(CPU, KUBETRAIN_FAULT="sigterm:step=11"), "env.KUBETRAIN_FAULT",
     with_env(CPU, KUBETRAIN_FAULT="sigterm:step=10")),
    ("KT106", with_env(P5, NCCL_ALGO="Ring"), "env.NCCL_ALGO", with_env(CPU, NCCL_ALGO="Ring")),
    ("KT106", with_env(P5, NCCL_SOCKET_IFNAME="eth0"), "env.NCCL_SOCKET_IFNAME",
     with_env(P5, NCCL_SOCKET_IFNAME="^lo,docker")),
    # The EKS guides' must-not-set list: aws-ofi-nccl sets both itself, whatever value a user would force.
    ("KT106", with_env(P5, FI_EFA_USE_DEVICE_RDMA="0"), "env.FI_EFA_USE_DEVICE_RDMA",
     with_env(CPU, FI_EFA_USE_DEVICE_RDMA="1")),
    ("KT106", with_env(P5, FI_EFA_FORK_SAFE="1"), "env.FI_EFA_FORK_SAFE", P5),
    ("KT106", with_env(P5, NCCL_NET="efa"), "env.NCCL_NET", with_env(P5, NCCL_NET="aws libfabric")),
    ("KT106", with_env(P5, NCCL_NET="Socket"), "env.NCCL_NET", with_env(P5, NCCL_NET="OFI")),
    ("KT106", {**with_env(P5, NCCL_NET="Libfabric"), "nccl": {"aws_ofi_nccl": "1.11.0", "nccl": "2.21.5"}},
     "env.NCCL_NET", {**with_env(P5, NCCL_NET="AWS Libfabric"), "nccl": {"aws_ofi_nccl": "1.11.0", "nccl": "2.21.5"}}),
    ("KT107", {**P5, "resources": {**P5["resources"], "shm": "2000Gi"}}, "resources.shm", P5),
    ("KT107", {**CPU, "volumes": [CKPT, {"name": "fast", "empty_dir": "memory", "size_limit": "3Gi",
                                         "mount_path": "/fast"}]}, "volumes.1.size_limit",
     {**CPU, "volumes": [CKPT, {"name": "fast", "empty_dir": "memory", "size_limit": "2Gi", "mount_path": "/fast"}]}),
    ("KT108", {**run(CPU, data={"source": "tokens", "path": "/data/t.bin"}), "volumes": [
        CKPT, {"name": "data", "empty_dir": "disk", "mount_path": "/data"}]}, "workload.run.data.path",
     {**run(CPU, data={"source": "tokens", "path": "/data/t.bin"}), "volumes": [
         CKPT, {"name": "data", "claim": "data", "mount_path": "/data"}]}),
    ("KT108", {**CPU, "volumes": [{"name": "scratch", "empty_dir": "disk", "mount_path": "/ckpt"}]},
     "workload.run.checkpoint.dir", CPU),
    ("KT108", command(["train.py"], checkpoint_dir="/var/ckpt"), "workload.checkpoint_dir",
     command(["train.py"], checkpoint_dir="/ckpt/run")),
    ("KT109", {**CPU, "namespace": "nope"}, "namespace", {**CPU, "namespace": "ml"}),
    ("KT111", {**P5, "instance_type": "p9.huge"}, "instance_type", P5),
    ("KT112", {**CPU, "volumes": [CKPT, {"name": "shm", "claim": "x", "mount_path": "/x"}]}, "volumes.1.name", CPU),
    ("KT112", {**CPU, "volumes": [CKPT, {"name": "x", "claim": "x", "mount_path": "/ckpt"}]}, "volumes.1.mount_path",
     CPU),
    ("KT113", run(P5, resilience={"watchdog_floor_s": 300}), "workload.run.resilience.watchdog_floor_s",
     run(CPU, resilience={"watchdog_floor_s": 300})),
    ("KT114", {**CPU, "elastic": {"min_nodes": 3, "max_nodes": 4}}, "elastic.min_nodes",
     {**CPU, "elastic": {"min_nodes": 1, "max_nodes": 4}}),
    ("KT115", with_env(P5, CUDA_LAUNCH_BLOCKING="1"), "env.CUDA_LAUNCH_BLOCKING",
     with_env(P5, CUDA_LAUNCH_BLOCKING="0", NCCL_P2P_DISABLE="0")),
    ("KT115", with_env(P5, NCCL_P2P_DISABLE="1"), "env.NCCL_P2P_DISABLE", with_env(CPU, NCCL_P2P_DISABLE="1")),
    ("KT116", with_env(CPU, NCCL_TIMEOUT="1800"), "env.NCCL_TIMEOUT", CPU),
    ("KT116", with_env(CPU, TORCH_DISTRIBUTED_TIMEOUT="1800"), "env.TORCH_DISTRIBUTED_TIMEOUT", CPU),
    ("KT117", with_env(CPU, TRITON_CACHE_DIR="/ckpt/triton"), "env.TRITON_CACHE_DIR",
     with_env(CPU, TRITON_CACHE_DIR="/tmp/triton")),
    ("KT118", with_env(P5, FI_EFA_USE_HUGE_PAGE="0"), "env.FI_EFA_USE_HUGE_PAGE",
     {**with_env(P5, FI_EFA_USE_HUGE_PAGE="0"), "resources": {**P5["resources"], "hugepages_2mi": "0Mi"}}),
    ("KT119", {**CPU, "image": "ghcr.io/org/trainer"}, "image", {**CPU, "image": "ghcr.io/org/trainer@sha256:" + "a" * 64}),
    ("KT119", {**CPU, "image": "ghcr.io/org/trainer:latest"}, "image", CPU),
    ("KT120", megatron(tensor=2, pipeline=3), "workload.parallelism", megatron(tensor=2, pipeline=2)),
    ("KT165", command(LLAMA_FLAGS, model={**LLAMA_MODEL, "layers": 40}), "workload.model",
     command(LLAMA_FLAGS, model=LLAMA_MODEL)),
    ("KT240", run(P5, model={"vocab_size": 32000, "dim": 4096, "n_layers": 32, "n_heads": 32}), "workload.run",
     run(P5, model={"vocab_size": 32000, "dim": 4096, "n_layers": 32, "n_heads": 32},
         strategy={"name": "fsdp", "activation_checkpointing": True}, precision="bf16")),
    ("KT121", {**megatron(), "workload": {**megatron()["workload"], "parallelism": {
        "tensor": 16, "micro_batch": 1, "global_batch": 512}}, "nodes": 4}, "workload.parallelism.tensor", megatron()),
    ("KT122", megatron(global_batch=500), "workload.parallelism.global_batch", megatron()),
    ("KT123", {**P5, "resources": {**P5["resources"], "cpu": "192"}}, "resources.cpu", P5),
    ("KT123", {**P5, "resources": {**P5["resources"], "memory": "2048Gi"}}, "resources.memory", P5),
    ("KT124", {**P5, "procs_per_node": 1, "resources": {"cpu": "8", "memory": "64Gi", "accelerators": 0}},
     "resources.accelerators", P5),
    ("KT125", {**P5, "resources": {**P5["resources"], "efa": 4}}, "resources.efa", P5),
    ("KT126", with_env(P5, FI_PROVIDER="tcp"), "env.FI_PROVIDER", with_env(P5, FI_PROVIDER="efa")),
    ("KT127", {**with_env(P5, NCCL_TUNER_PLUGIN="libnccl-ofi-tuner.so"), "nccl": {"aws_ofi_nccl": "1.16.0",
                                                                                 "nccl": "2.27.3"}},
     "env.NCCL_TUNER_PLUGIN", {**with_env(P5, NCCL_TUNER_PLUGIN="libnccl-ofi-tuner.so"),
                               "nccl": {"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2"}}),
    ("KT128", {**P5, "resources": {**P5["resources"], "efa": 0}}, "resources.efa",
     {**P5, "nodes": 1, "resources": {**P5["resources"], "efa": 0}}),
    ("KT129", with_env(P5, TORCH_NCCL_ASYNC_ERROR_HANDLING="0"), "env.TORCH_NCCL_ASYNC_ERROR_HANDLING",
     with_env(P5, TORCH_NCCL_ASYNC_ERROR_HANDLING="3")),
    ("KT129", with_env(P5, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="300"), "env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
     with_env(P5, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="900")),
    ("KT129", {**with_env(megatron(), TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="900"), "workload": {
        **megatron()["workload"], "command": ["pretrain_gpt.py", "--distributed-timeout-minutes", "30"]}},
     "env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", with_env(megatron(), TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="900")),
    ("KT140", command(["torchrun", "--nproc_per_node=8", "train.py"]), "workload.command.0", command(["train.py"])),
    ("KT140", command(["python", "train.py"]), "workload.command.0", command(["-m", "package.train"])),
    ("KT140", command(["-m", "torch.distributed.run", "train.py"]), "workload.command.0",
     command(["torchrun", "--nnodes=2", "--node_rank=$(PET_NODE_RANK)", "train.py"], launcher="none")),
    ("KT141", command(["train.py", "--node_rank", "0"]), "workload.command.1",
     command(["train.py", "--node_rank", "$(PET_NODE_RANK)"])),
    ("KT141", command(["torchrun", "--nnodes=4", "train.py"], launcher="none"), "workload.command.1",
     command(["torchrun", "--nnodes=2", "train.py"], launcher="none")),
    ("KT142", {**megatron(), "workload": {**megatron()["workload"], "command": [
        "pretrain_gpt.py", "--tensor-model-parallel-size", "4"]}}, "workload.parallelism.tensor",
     {**megatron(), "workload": {**megatron()["workload"], "command": [
         "pretrain_gpt.py", "--tensor-model-parallel-size=2", "--global-batch-size", "512"]}}),
    ("KT142", {**megatron(), "workload": {**megatron()["workload"], "command": [
        "megatron_gpt_pretraining.py", "model.micro_batch_size=4"]}}, "workload.parallelism.micro_batch", megatron()),
    # Without a Parallelism the rules read the command's own flags.
    ("KT121", command(["pretrain_gpt.py", "--tensor-model-parallel-size", "16"]), "workload.command",
     command(["pretrain_gpt.py", "--tensor-model-parallel-size", "8"])),
    ("KT122", command(["pretrain_gpt.py", "--micro-batch-size", "3", "--global-batch-size", "500"]),
     "workload.command", command(["pretrain_gpt.py", "--micro-batch-size", "2", "--global-batch-size", "512"])),
    ("KT143", run(CPU, metrics={"port": 29500}), "workload.run.metrics.port", run(CPU, metrics={"port": 23456})),
    ("KT143", {**run(CPU, metrics={"port": 23456}), "target": PyTorchJob()}, "workload.run.metrics.port",
     {**run(CPU, metrics={"port": 29500}), "target": PyTorchJob()}),
    ("KT703", {**CPU, "target": PyTorchJob(), "queue": "KUEUE"}, "target", {**CPU, "queue": "KUEUE"}),
    ("KT144", {**P5, "pod": {"node_selector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}},
     "pod.node_selector.node.kubernetes.io/instance-type", {**P5, "pod": {"node_selector": {"team": "llm"}}}),
    # The API server's rules, refused at the input (kubetrain.apiserver is the backstop: test_apiserver.py).
    ("KT130", pod(CPU, tolerations=[{"key": "a", "operator": "Exists", "value": "x"}]), "pod.tolerations.0.operator",
     pod(CPU, tolerations=[{"key": "a", "operator": "Exists"}])),
    ("KT130", pod(CPU, tolerations=[{"value": "x"}]), "pod.tolerations.0.operator",
     pod(CPU, tolerations=[{"operator": "Exists"}])),
    ("KT130", pod(CPU, tolerations=[{"key": "a", "effect": "NoSchedule", "toleration_seconds": 60}]),
     "pod.tolerations.0.toleration_seconds", pod(CPU, tolerations=[{"key": "a", "effect": "NoExecute",
                                                                     "toleration_seconds": 60}])),
    ("KT131", pod(CPU, affinity=node_affinity([])), NODE_TERMS, pod(CPU, affinity=node_affinity([TERM]))),
    ("KT131", pod(CPU, affinity=node_affinity([{}])), f"{NODE_TERMS}.0", pod(CPU, affinity=node_affinity([TERM]))),
    ("KT131", pod(CPU, affinity=node_affinity([{"matchExpressions": [{"key": "zone", "operator": "In"}]}])),
     f"{NODE_TERMS}.0.matchExpressions.0.values", pod(CPU, affinity=node_affinity([TERM]))),
    ("KT131", pod(CPU, affinity=node_affinity([{"matchExpressions": [{"key": "gen", "operator": "Gt",
                                                                      "values": ["five"]}]}])),
     f"{NODE_TERMS}.0.matchExpressions.0.values.0",
     pod(CPU, affinity=node_affinity([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["5"]}]}]))),
    ("KT131", pod(CPU, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": TERM}]}}), "pod.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuring"
     "Execution.0.weight", pod(CPU, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 1, "preference": TERM}]}})),
    ("KT131", pod(CPU, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": ""}]}}),
     "pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.0.topologyKey",
     pod(CPU, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}})),
    ("KT132", {**P5, "resources": {**P5["resources"], "hugepages_2mi": "5121Mi"}}, "resources.hugepages_2mi",
     {**P5, "resources": {**P5["resources"], "hugepages_2mi": "5120Mi"}}),
    ("KT133", {**run(CPU, metrics={"port": 65280}), "procs_per_node": 300}, "workload.run.metrics.port",
     {**run(CPU, metrics={"port": 65000}), "procs_per_node": 300}),
    ("KT134", {**pod(CPU, labels={"job-name": "x"}), "target": IndexedJob()}, "pod.labels.job-name",
     {**pod(CPU, labels={"team": "x"}), "target": IndexedJob()}),
    ("KT134", {**pod(CPU, labels={"training.kubeflow.org/replica-type": "x"}), "target": PyTorchJob()},
     "pod.labels.training.kubeflow.org/replica-type", {**pod(CPU, labels={"example.com/replica": "x"}),
                                                       "target": PyTorchJob()}),
    ("KT134", pod(CPU, labels={"jobset.sigs.k8s.io/jobset-name": "x"}), "pod.labels.jobset.sigs.k8s.io/jobset-name",
     pod(CPU, labels={"example.com/jobset": "x"})),
    ("KT134", pod(CPU, labels={"kubetrain.dev/job": "other"}), "pod.labels.kubetrain.dev/job", CPU),
    # kubetrain's own annotation (the run config's 64-hex hash) counts too
    ("KT135", pod(CPU, annotations={"example.com/blob": "x" * (262_144 - 100)}), "pod.annotations",
     pod(CPU, annotations={"example.com/blob": "x" * (262_144 - 200)})),
    ("KT150", {**run(CPU, metrics={"port": 0}), "pod": {"liveness_probe": PROBE}}, "pod.liveness_probe.http_get.port",
     {**CPU, "pod": {"liveness_probe": PROBE}}),  # the trainer's metrics port is named "metrics" unless it is off
    ("KT150", {**CPU, "pod": {"startup_probe": {"tcp_socket": {"port": 8080}, "exec": {"command": ["true"]}}}},
     "pod.startup_probe", {**CPU, "pod": {"startup_probe": {"tcp_socket": {"port": 8080}}}}),
    ("KT150", {**CPU, "pod": {"liveness_probe": {"tcp_socket": {"port": 8080}, "success_threshold": 2}}},
     "pod.liveness_probe.success_threshold", {**CPU, "pod": {"liveness_probe": {"tcp_socket": {"port": 8080}}}}),
    ("KT150", {**CPU, "pod": {"liveness_probe": {"tcp_socket": {"port": 70000}}}},
     "pod.liveness_probe.tcp_socket.port", {**CPU, "pod": {"liveness_probe": {"tcp_socket": {"port": 7000}}}}),
    ("KT151", {**CPU, "pod": {"init_containers": [{"name": "node", "command": ["true"]}]}},
     "pod.init_containers.0.name", {**CPU, "pod": {"init_containers": [{"name": "fetch", "command": ["true"]}]}}),
    ("KT151", {**CPU, "pod": {"init_containers": [{"name": "fetch", "command": ["true"], "volume_mounts": [
        {"name": "chkpt", "mount_path": "/ckpt"}]}]}}, "pod.init_containers.0.volume_mounts.0.name",
     {**CPU, "pod": {"init_containers": [{"name": "fetch", "command": ["true"], "volume_mounts": [
         {"name": "ckpt", "mount_path": "/ckpt"}]}]}}),
    ("KT152", {**CPU, "pod": {"priority_class": "system-cluster-critical"}}, "pod.priority_class",
     {**CPU, "pod": {"priority_class": "training-high"}}),
    ("KT153", {**CPU, "pod": {"priority_class": HIGH}}, "pod.priority_class",
     {**CPU, "pod": {"priority_class": "high"}}),
    ("KT153", {**CPU, "pod": {"service_account": LAB}}, "pod.service_account",
     {**CPU, "pod": {"service_account": IRSA}}),
    ("KT155", {**with_env(CPU, AWS_ACCESS_KEY_ID="AKIA0000"), "pod": {"service_account": IRSA}},
     "env.AWS_ACCESS_KEY_ID", {**with_env(CPU, AWS_REGION="us-west-2"), "pod": {"service_account": IRSA}}),
    ("KT155", {**CPU, "pod": {"service_account": IRSA, "init_containers": [
        {"name": "fetch", "command": ["true"], "env": {"AWS_PROFILE": "dev"}}]}}, "pod.init_containers.0.env.AWS_PROFILE",
     {**with_env(CPU, AWS_ACCESS_KEY_ID="AKIA0000"), "pod": {"service_account": "trainer"}}),
    ("KT155", {**CPU, "pod": {"service_account": IRSA}, "volumes": [
        CKPT, {"name": "aws-iam-token", "empty_dir": "disk", "mount_path": "/tok"}]}, "volumes.1",
     {**CPU, "pod": {"service_account": IRSA}}),
    ("KT156", {**CPU, "resources": {"cpu": "2", "memory": "4Gi", "cpu_limit": "1500m"}}, "resources.cpu_limit",
     {**CPU, "resources": {"cpu": "2", "memory": "4Gi", "cpu_limit": "2"}}),
    ("KT201", run(CPU, batch={"global_size": 5, "micro_size": 1}), "workload.run.batch.global_size", CPU),
    ("KT201", {**run(CPU, batch={"global_size": 16, "micro_size": 1}), "elastic": {"min_nodes": 1, "max_nodes": 4}},
     "workload.run.batch.global_size",
     {**run(CPU, batch={"global_size": 12, "micro_size": 1}), "elastic": {"min_nodes": 1, "max_nodes": 4}}),
    ("KT242", run(CPU, strategy={"name": "ddp", "accumulated_gradients": "sharded"}),
     "workload.run.strategy.accumulated_gradients", run(CPU, strategy={"name": "ddp"})),
    ("KT216", run(CPU, optimizer={"warmup_steps": 10}), "workload.run.optimizer.warmup_steps",
     run(CPU, optimizer={"warmup_steps": 9})),
    ("KT217", run(CPU, checkpoint={"dir": "/ckpt/run", "interval": 5, "local_dir": "/var/local", "local_interval": 5}),
     "workload.run.checkpoint.local_interval",
     run(CPU, checkpoint={"dir": "/ckpt/run", "interval": 5, "local_dir": "/var/local", "local_interval": 1})),
    ("KT108", {**run(CPU, metrics={"tensorboard_dir": "/scratch/tb"}), "volumes": [CKPT, SCRATCH]},
     "workload.run.metrics.tensorboard_dir", run(CPU, metrics={"tensorboard_dir": "/ckpt/tb"})),
    # Profiling: the default folder is beside the checkpoints, or TensorBoard's when it is on (KT108 then covers it).
    ("KT255", run(CPU, checkpoint={"dir": "/var/run"}, profiling={"enabled": True, "start_step": 2}),
     "workload.run.profiling.dir", run(CPU, profiling={"enabled": True, "start_step": 2})),
    ("KT255", {**run(CPU, profiling={"enabled": True, "start_step": 2, "dir": "/scratch/profile"}),
               "volumes": [CKPT, SCRATCH]}, "workload.run.profiling.dir", run(CPU, profiling={"enabled": True, "start_step": 2, "dir": "/ckpt/profile"})),
    ("KT255", run(CPU, profiling={"enabled": True, "start_step": 9, "active": 3}), "workload.run.profiling.start_step",
     run(CPU, profiling={"enabled": True, "start_step": 8, "active": 3})),
    ("KT255", run(CPU, profiling={"enabled": True, "start_step": 2, "repeat": 4}),
     "workload.run.profiling.start_step", run(CPU, profiling={"enabled": True, "start_step": 2, "repeat": 2})),
    ("KT255", run(CPU, profiling={"enabled": True, "start_step": 2, "ranks": [0, 2]}), "workload.run.profiling.ranks",
     run(CPU, profiling={"enabled": True, "start_step": 2, "ranks": [0, 1]})),
    ("KT218", run(CPU, checkpoint={"dir": "/ckpt/run", "interval": 5, "local_dir": "/ckpt/local",
                                   "local_interval": 1}), "workload.run.checkpoint.local_dir",
     run(CPU, checkpoint={"dir": "/ckpt/run", "interval": 5, "local_dir": "/var/local", "local_interval": 1})),
]


@pytest.mark.parametrize(("code", "breaking", "path", "passing"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_breaks_and_passes(code, breaking, path, passing):
    name = "j" * 60 if code == "KT101" else "job"
    assert (code, path) in findings(breaking, name)
    assert not [f for f in findings(passing) if f[0] == code]


def test_a_range_rule_is_one_line_whatever_the_range():
    props = {**run(CPU, batch={"global_size": 16, "micro_size": 1}), "elastic": {"min_nodes": 1, "max_nodes": 2**31 - 1}}
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", props)
    (finding,) = [f for f in fleet_findings(app) if f.problem.code == "KT201"]
    assert "it is not at 3, 5-7, 9-15, 17-2147483647 nodes" in finding.problem.message
    assert "(1, 2, 4, 8, 16)" in finding.problem.fix


def test_every_rule_is_documented_and_explained():
    rules = every_rule()
    assert len({r.code for r in rules}) == len(rules)
    for rule in rules:
        assert re.fullmatch(r"KT\d{3}", rule.code) and rule.severity in ("error", "warning")
        assert rule.title and rule.rationale and rule.fix and rule.source, rule.code
    tested = {case[0] for case in CASES}
    # Rules checked elsewhere: input shape (KT0xx), names (KT110 in test_training_job), run-local (KT3xx), and
    # the areas with tests of their own.
    # KT154 (a ServiceAccount's role ARN) in test_pod_parts, KT157-KT160 (a function that cannot be captured, a name
    # nothing defines, DataParallel, a package index) in test_function_workload.
    untested = {r.code for r in rules if r.code.startswith("KT1")} - tested - {"KT110", "KT154", "KT157", "KT158",
                                                                               "KT159", "KT160"}
    assert not untested, f"rules without a breaking and a passing case here: {sorted(untested)}"


def test_every_source_is_one_a_user_can_open():
    # `kubetrain explain` prints the source: a page or a file of the upstream project (with its version where the
    # project versions its docs), or a file of this repository, never a document that only its developers have.
    for rule in every_rule():
        for citation in rule.source.split("; "):
            if citation.startswith("https://"):  # a URL, then perhaps what to look for there in parentheses
                assert " " not in citation.split(" (")[0], (rule.code, citation)
            else:
                path = citation.split(" (")[0]
                assert (ROOT / path).exists(), f"{rule.code}: {citation!r} is neither a URL nor a file of the repository"


@pytest.mark.processes
def test_explain_every_code():
    from kubetrain.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    for rule in every_rule():
        result = runner.invoke(app, ["explain", rule.code.lower()])
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"{rule.code} ({rule.severity}): {rule.title}")
    result = kubetrain("explain", "KT1066")
    assert result.returncode == 2 and "did you mean" in result.stderr and "Traceback" not in result.stderr
