"""Value checks an experienced user of each operator expects, at the input: AWS ids, names, URLs, durations and
references between constructs. Each bad value is one problem with its code and the field the user wrote."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubetrain import App, ArgoCd, Cluster, NcclTest, TrainingJob
from kubetrain.pipeline import fleet_errors
from kubetrain.platform.gpu_monitoring import DcgmExporter, TrainingPodMonitor
from kubetrain.platform.kueue_queues import ClusterQueue, ResourceFlavor
from kubetrain.platform.node_pools import CpuNodePool, EfaNodePool
from kubetrain.platform.queues import TopologyPlacement
from kubetrain.platform.security import PodSecurity
from kubetrain.platform.storage import Efs, FsxLustre, S3Bucket
from kubetrain.platform.volcano_queues import VolcanoQueue
from platform_support import CPU, P5

from kubetrain_runtime.problems import ConfigError, unclaimed_rejections

FS = "fs-0123456789abcdef0"
FSX = {"file_system_id": FS, "dns_name": f"{FS}.fsx.us-west-2.amazonaws.com", "mount_name": "abcdefgh"}
REPO = "https://github.com/example/fleet.git"
JOB = {"image": "img:1", "nodes": 1, "procs_per_node": 1, "resources": {"cpu": "1", "memory": "2Gi"},
       "workload": {"kind": "command", "command": ["train.py"]}}


def problems(define: Callable[[App, Cluster], Any]) -> list[tuple[str, str]]:
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml", "other"])
    unclaimed_rejections()
    define(app, cluster)
    found = [(f.problem.code, f.problem.path) for f in fleet_errors(app)]
    return found + [(p.code, p.path) for r in unclaimed_rejections() for p in r.problems]


CASES = [
    # Karpenter pools: EC2 ids, zones of one region, the role's name (not its ARN)
    ("subnet id", lambda a, c: EfaNodePool(c, "p5", **{**P5, "subnet_ids": ["subnet-xyz"]}), "subnet_ids.0"),
    ("security group id", lambda a, c: EfaNodePool(c, "p5", **{**P5, "security_group_ids": ["sg_123"]}),
     "security_group_ids.0"),
    ("zone without its letter", lambda a, c: EfaNodePool(c, "p5", **{**P5, "zones": ["us-west-2"]}), "zones.0"),
    ("zones of two regions", lambda a, c: CpuNodePool(c, "cpu", **{**CPU, "zones": ["us-west-2a", "us-east-1a"]}),
     "zones"),
    ("capacity reservation id", lambda a, c: EfaNodePool(c, "p5", **{**P5, "capacity_type": "reserved",
                                                                     "capacity_reservation_ids": ["res-1"]}),
     "capacity_reservation_ids.0"),
    ("role ARN", lambda a, c: EfaNodePool(c, "p5", **{**P5, "role": "arn:aws:iam::123456789012:role/Node"}), "role"),
    ("role with a space", lambda a, c: EfaNodePool(c, "p5", **{**P5, "role": "my role"}), "role"),
    ("placement group", lambda a, c: EfaNodePool(c, "p5", **{**P5, "placement_group": ""}), "placement_group"),
    # Storage: FSx's DNS and mount names, EFS ranges and paths, S3 names by bucket type
    ("fsx dns name", lambda a, c: FsxLustre(c, "fsx", **{**FSX, "dns_name": "fsx.example.com"}), "dns_name"),
    ("fsx dns of another fs", lambda a, c: FsxLustre(c, "fsx", **{
        **FSX, "dns_name": "fs-0fffffffffffffff0.fsx.us-west-2.amazonaws.com"}), "dns_name"),
    ("fsx mount name", lambda a, c: FsxLustre(c, "fsx", **{**FSX, "mount_name": "Bad Name"}), "mount_name"),
    ("fsx id", lambda a, c: FsxLustre(c, "fsx", **{**FSX, "file_system_id": "fs-1"}), "file_system_id"),
    ("efs gid range reversed", lambda a, c: Efs(c, "efs", file_system_id=FS, gid_range=(2000, 1000)), "gid_range"),
    ("efs base path", lambda a, c: Efs(c, "efs", file_system_id=FS, base_path="data"), "base_path"),
    ("s3 region", lambda a, c: S3Bucket(c, "s3", bucket_name="corp-data", region="Oregon"), "region"),
    ("s3 prefix", lambda a, c: S3Bucket(c, "s3", bucket_name="corp-data", prefix="/data"), "prefix"),
    ("s3 double dot", lambda a, c: S3Bucket(c, "s3", bucket_name="corp..data"), "bucket_name"),
    ("s3 ip address", lambda a, c: S3Bucket(c, "s3", bucket_name="192.168.1.1"), "bucket_name"),
    ("s3 capacity", lambda a, c: S3Bucket(c, "s3", bucket_name="corp-data", capacity="lots"), "capacity"),
    ("s3 directory bucket name", lambda a, c: S3Bucket(c, "s3", bucket_name="corp-data", bucket_type="directory"),
     "bucket_name"),
    # Monitoring: a port by name, Prometheus durations, label syntax
    ("pod monitor port number", lambda a, c: TrainingPodMonitor(c, "m", port="9400"), "port"),
    ("pod monitor path", lambda a, c: TrainingPodMonitor(c, "m", path="metrics"), "path"),
    ("pod monitor interval", lambda a, c: TrainingPodMonitor(c, "m", interval="0s"), "interval"),
    ("pod monitor labels", lambda a, c: TrainingPodMonitor(c, "m", prometheus_labels={"bad key": "x"}),
     "prometheus_labels.bad key"),
    ("dcgm labels", lambda a, c: DcgmExporter(c, "d", pools=[EfaNodePool(c, "p5", **P5)],
                                              prometheus_labels={"release": "-bad"}), "prometheus_labels.release"),
    # Security and queues
    ("pod security audit below enforce", lambda a, c: PodSecurity(c, level="restricted", audit="baseline"), "audit"),
    ("volcano resource name", lambda a, c: VolcanoQueue(c, "q", capability={"gpus": "8"}), "capability.gpus"),
    ("volcano quantity", lambda a, c: VolcanoQueue(c, "q", capability={"cpu": "lots"}), "capability.cpu"),
    ("topology level", lambda a, c: TopologyPlacement(level="not a label!"), "level"),
    ("quota of no resource", lambda a, c: ClusterQueue(c, "cq", flavors=[ResourceFlavor(c, "cpu", pool=CpuNodePool(
        c, "cpu", **CPU))], quotas={"cpu": {"gpus": "8"}}), "quotas.cpu.gpus"),
    ("flavor listed twice", lambda a, c: ClusterQueue(c, "cq", flavors=[f := ResourceFlavor(c, "cpu", pool=CpuNodePool(
        c, "cpu", **CPU)), f]), "flavors"),
    ("topology domain of no label", lambda a, c: EfaNodePool(c, "p5", **{**P5, "topology_domain_nodes": {
        "not a label": 4}}), "topology_domain_nodes.not a label"),
    # Argo CD delivery
    ("argocd server not a URL", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, destinations={
        "c": {"server": "prod-cluster"}}), "destinations.c.server"),
    ("argocd server over http", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, destinations={
        "c": {"server": "http://prod:6443"}}), "destinations.c.server"),
    ("argocd empty cluster name", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, destinations={"c": {"name": ""}}),
     "destinations.c.name"),
    ("argocd revision", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, revision="my branch",
                                            destinations={"c": {"name": "c"}}), "revision"),
    ("argocd retry of no time", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, destinations={"c": {"name": "c"}},
                                                    retry={"duration": "0s"}), "retry.duration"),
    ("argocd retry longest below first", lambda a, c: ArgoCd(a, "argocd", repo_url=REPO, destinations={
        "c": {"name": "c"}}, retry={"duration": "5m", "max_duration": "1m"}), "retry.max_duration"),
    # Jobs against other constructs and the API server's admission
    ("claim of another namespace", lambda a, c: TrainingJob(c, "j", **{**JOB, "volumes": [{
        "name": "data", "claim": S3Bucket(c, "s3", bucket_name="corp-data", namespace="other"),
        "mount_path": "/data"}]}), "volumes.0.claim"),
    ("mlflow uri", lambda a, c: TrainingJob(c, "j", **{**JOB, "workload": {"kind": "trainer", "run": {
        "batch": {"global_size": 1, "micro_size": 1}, "max_steps": 1,
        "metrics": {"mlflow_tracking_uri": "mlflow server"}}}}), "workload.run.metrics.mlflow_tracking_uri"),
    ("root with run_as_non_root", lambda a, c: TrainingJob(c, "j", **{**JOB, "pod": {"security_context": {
        "run_as_user": 0, "run_as_non_root": True}}}), "pod.security_context.run_as_user"),
    ("mount over /proc", lambda a, c: TrainingJob(c, "j", **{**JOB, "volumes": [{
        "name": "x", "claim": "x", "mount_path": "/proc/x"}]}), "volumes.0.mount_path"),
    ("mount path with ..", lambda a, c: TrainingJob(c, "j", **{**JOB, "volumes": [{
        "name": "x", "claim": "x", "mount_path": "/data/../etc"}]}), "volumes.0.mount_path"),
    ("nccl test of no bytes", lambda a, c: NcclTest(c, "n", image="i:1", instance_type="p5.48xlarge",
                                                    max_bytes="0"), "max_bytes"),
    ("relative tensorboard dir", lambda a, c: TrainingJob(c, "j", **{**JOB, "workload": {"kind": "trainer", "run": {
        "batch": {"global_size": 1, "micro_size": 1}, "max_steps": 1, "metrics": {"tensorboard_dir": "tb"}}}}),
     "workload.run.metrics.tensorboard_dir"),
]


@pytest.mark.parametrize(("define", "path"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_bad_value_is_one_problem_on_its_field(define, path):
    found = problems(define)
    assert [p for code, p in found if code == "KT003" or code == "KT414"] == [path], found


def test_the_same_constructs_with_good_values_pass():
    def good(app: App, c: Cluster) -> None:
        pool = EfaNodePool(c, "p5", **{**P5, "capacity_type": "reserved",
                                       "capacity_reservation_ids": ["cr-0123456789abcdef0"], "placement_group": "pg"})
        FsxLustre(c, "fsx", **FSX)
        Efs(c, "efs", file_system_id=FS, gid_range=(50000, 60000), base_path="/data")
        S3Bucket(c, "s3", bucket_name="corp-data", region="us-west-2", prefix="data/", capacity="2Ti")
        S3Bucket(c, "express", bucket_name="corp-data--usw2-az1--x-s3", bucket_type="directory")
        TrainingPodMonitor(c, "m", interval="1m30s", prometheus_labels={"release": "kube-prometheus-stack"})
        DcgmExporter(c, "d", pools=[pool])
        PodSecurity(c, level="baseline", audit="restricted")
        ArgoCd(app, "argocd", repo_url=REPO, revision="release/v1.2", destinations={
            "c": {"server": "https://kubernetes.default.svc"}}, retry={"duration": "10s", "max_duration": "3m"})
        TrainingJob(c, "j", **{**JOB, "volumes": [{"name": "data", "claim": "data", "mount_path": "/data"}],
                               "pod": {"priority_class": "training-high"}})

    assert problems(good) == []


def test_a_volcano_queued_job_keeps_volcano_as_its_scheduler():
    def define(app: App, c: Cluster) -> None:
        TrainingJob(c, "j", **{**JOB, "queue": VolcanoQueue(c, "q"), "pod": {"scheduler_name": "default-scheduler"}})
    assert problems(define) == [("KT424", "pod.scheduler_name")]


def test_a_cluster_does_not_own_the_default_namespace():
    with pytest.raises(ConfigError) as raised:
        Cluster(App(), "c", kubernetes_version="1.33", namespaces=["default"])
    assert [(p.code, p.path) for p in raised.value.problems] == [("KT003", "namespaces")]
