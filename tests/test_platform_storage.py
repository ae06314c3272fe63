"""Storage claims: FSx (static and dynamic), EFS, S3 through Mountpoint; the claim interface and its rules."""

from __future__ import annotations

import pytest
from kubetrain.platform.storage import Efs, FsxLustre, S3Bucket, checkpoint_volume_problems, dataset_volume_problems
from platform_support import cluster, codes, emitted, rejected

STATIC_FSX = {"file_system_id": "fs-0abc1230", "dns_name": "fs-0abc1230.fsx.us-west-2.amazonaws.com",
              "mount_name": "abcdefgh", "capacity_gib": 2400}


def test_every_backend_emits_valid_objects(crds):
    c = cluster(("ml", "research"))
    FsxLustre(c, "checkpoints", **STATIC_FSX)
    FsxLustre(c, "scratch", namespace="research", subnet_id="subnet-0abc1234", security_group_ids=["sg-00000001", "sg-00000002"],
              deployment_type="PERSISTENT_1", throughput=100)
    Efs(c, "logs", file_system_id="fs-01234567", gid_range=(1000, 2000), base_path="/logs")
    S3Bucket(c, "datasets", bucket_name="corp-datasets", region="us-west-2", prefix="tokens/")
    objects = emitted(c, crds)
    pv = objects["PersistentVolume/ml-checkpoints"]["spec"]
    assert pv["csi"]["volumeHandle"] == "fs-0abc1230" and pv["persistentVolumeReclaimPolicy"] == "Retain"
    assert objects["PersistentVolumeClaim/checkpoints"]["spec"]["volumeName"] == "ml-checkpoints"
    sc = objects["StorageClass/fsx-research-scratch"]
    assert sc["parameters"] == {"subnetId": "subnet-0abc1234", "securityGroupIds": "sg-00000001,sg-00000002",
                                "deploymentType": "PERSISTENT_1", "perUnitStorageThroughput": "100"}
    assert objects["StorageClass/efs-ml-logs"]["parameters"]["provisioningMode"] == "efs-ap"
    s3 = objects["PersistentVolume/ml-datasets"]["spec"]
    assert s3["accessModes"] == ["ReadOnlyMany"] and s3["storageClassName"] == ""
    assert s3["mountOptions"] == ["region us-west-2", "prefix tokens/"]
    assert codes(c) == []


def test_claims_expose_what_job_rules_need():
    c = cluster()
    fsx = FsxLustre(c, "checkpoints", **STATIC_FSX)
    data = S3Bucket(c, "datasets", bucket_name="corp-datasets")
    assert (fsx.claim_name, fsx.namespace, fsx.read_only, fsx.supports_rename, fsx.persistent, fsx.shared) == (
        "checkpoints", "ml", False, True, True, True)
    assert (data.read_only, data.supports_rename) == (True, False)
    assert data.volume() == {"name": "datasets", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}}
    assert fsx.volume("ckpt") == {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}
    assert data.volume_mount("/data") == {"name": "datasets", "mountPath": "/data", "readOnly": True}


def test_checkpoints_need_a_volume_dcp_can_write():
    c = cluster()
    assert checkpoint_volume_problems(FsxLustre(c, "checkpoints", **STATIC_FSX)) == []
    writable_s3 = S3Bucket(c, "bucket", bucket_name="corp-ckpt", read_only=False)
    [problem] = checkpoint_volume_problems(writable_s3)
    assert (problem.code, problem.path) == ("KT412", "checkpoint_dir") and "rename" in problem.message
    assert "FSx" in problem.fix
    assert checkpoint_volume_problems(S3Bucket(c, "express", bucket_name="ckpt--usw2-az1--x-s3", read_only=False,
                                               bucket_type="directory")) == []
    [read_only] = checkpoint_volume_problems(FsxLustre(c, "ro", **STATIC_FSX, read_only=True))
    assert read_only.code == "KT412"


def test_datasets_are_mounted_read_only():
    c = cluster()
    assert dataset_volume_problems(S3Bucket(c, "datasets", bucket_name="corp-datasets")) == []
    [problem] = dataset_volume_problems(FsxLustre(c, "shared", **STATIC_FSX))
    assert (problem.code, problem.path) == ("KT413", "volumes") and "read_only" in problem.fix


@pytest.mark.parametrize("fields, code, path", [
    ({"capacity_gib": 3000}, "KT410", "capacity_gib"),
    ({"capacity_gib": 4800}, None, None),
    ({"deployment_type": "SCRATCH_1", "capacity_gib": 4800}, "KT410", "capacity_gib"),
    ({"deployment_type": "SCRATCH_1", "capacity_gib": 7200}, None, None),
    ({"throughput": 100}, "KT411", "throughput"),
    ({"deployment_type": "SCRATCH_2", "throughput": 125}, "KT411", "throughput"),
    ({"deployment_type": "PERSISTENT_1", "throughput": 40}, None, None),
])
def test_fsx_capacity_and_throughput_per_deployment_type(fields, code, path):
    c = cluster()
    if code is None:
        FsxLustre(c, "fsx", subnet_id="subnet-0abc1234", security_group_ids=["sg-00000001"], **fields)
        return
    [problem] = rejected(c, lambda: FsxLustre(c, "fsx", subnet_id="subnet-0abc1234", security_group_ids=["sg-00000001"],
                                              **fields))
    assert (problem.code, problem.path) == (code, path) and problem.fix


def test_half_a_static_volume_or_a_foreign_namespace_is_caught():
    c = cluster()
    assert rejected(c, lambda: FsxLustre(c, "fsx", file_system_id="fs-0abc1234"))[0].code == "KT002"
    S3Bucket(c, "elsewhere", bucket_name="corp-datasets", namespace="kube-public")
    assert [code for code, _, _ in codes(c)] == ["KT002", "KT109"]


@pytest.mark.parametrize("capacity", ["0", "a lot", "-1Ti"])
def test_a_buckets_nominal_capacity_is_a_positive_size(capacity):
    c = cluster()  # the PersistentVolume's capacity must be greater than zero
    problems = rejected(c, lambda: S3Bucket(c, "data", bucket_name="corp-datasets", capacity=capacity))
    assert [(p.code, p.path) for p in problems] == [("KT003", "capacity")]
