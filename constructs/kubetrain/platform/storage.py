"""Shared storage as claims jobs mount: FSx for Lustre, EFS access points, S3 through Mountpoint.

    fsx = FsxLustre(cluster, "checkpoints", namespace="ml", file_system_id="fs-0abc", dns_name=..., mount_name=...,
                    capacity_gib=2400)
    data = S3Bucket(cluster, "datasets", namespace="ml", bucket_name="corp-datasets", region="us-west-2")

Each construct is one PersistentVolumeClaim in a namespace (plus its StorageClass or static
PersistentVolume, cluster-scoped). Facts: the AWS CSI drivers' parameter docs (FSx for Lustre, EFS, Mountpoint for S3).

Interface for jobs (read-only): `claim_name`, `namespace`, `read_only`, `supports_rename`, `persistent`,
`shared`, `volume()` (the pod's volume entry), `volume_mount(path)`, and the rules
`checkpoint_volume_problems(claim)` (KT412) and `dataset_volume_problems(claim)` (KT413). A Triton cache
must not go on any claim here (`shared`): the job rules' KT117.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from kubetrain.cluster import Cluster
from kubetrain.kinds.kubernetes import STORAGE_API_VERSION
from kubetrain.model.aws_ids import (
    REGION,
    FileSystemId,
    FsxMountName,
    Region,
    SecurityGroupId,
    SubnetId,
    bucket_name_problem,
)
from kubetrain.model.names import AbsolutePath, Dns1123Label
from kubetrain.model.quantity import PositiveByteQuantity
from kubetrain.model.strict import StrictProps
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain.rules.sources import DCP, FSX_CAPACITY, FSX_CSI, FSX_PERF, MOUNTPOINT, VOLUMES, cite
from kubetrain_runtime.problems import INVALID_VALUE, Problem, rule_violation

FSX_CAPACITY = register(
    "KT410", "error", "FSx for Lustre capacity not valid for the deployment type",
    rationale="FSx creates file systems only in fixed steps: 1200 GiB, 2400 GiB, then multiples of 2400 GiB "
              "(SCRATCH_2, PERSISTENT_1, PERSISTENT_2); SCRATCH_1 1200 GiB, 2400 GiB, then multiples of 3600 GiB. "
              "Another size fails at provisioning, long after the pull request merged.",
    fix="use 1200, 2400 or a multiple of 2400 GiB (SCRATCH_1: a multiple of 3600)",
    source=cite(FSX_CAPACITY, FSX_CSI))
FSX_THROUGHPUT = register(
    "KT411", "error", "FSx for Lustre throughput not valid for the deployment type",
    rationale="perUnitStorageThroughput (MB/s per TiB) takes fixed values: PERSISTENT_1 50, 100, 200 (SSD) or "
              "12, 40 (HDD); PERSISTENT_2 125, 250, 500, 1000; scratch file systems take none.",
    fix="choose one of the deployment type's values (or none for SCRATCH_*)", source=cite(FSX_PERF, FSX_CSI))
CHECKPOINT_VOLUME = register(
    "KT412", "error", "checkpoints on a volume that cannot hold them",
    rationale="A checkpoint must outlive the pod, be writable, and support what torch DCP does: it writes its "
              ".metadata to a temporary file and renames it. Mountpoint for S3 cannot rename files on "
              "general-purpose buckets, so DCP checkpoints fail there.",
    fix="write checkpoints to FSx for Lustre or EFS (or an S3 directory bucket) mounted read-write",
    source=cite(MOUNTPOINT, DCP))
DATASET_READ_WRITE = register(
    "KT413", "warning", "dataset mounted read-write",
    rationale="Training reads its data; a read-write mount lets one buggy rank corrupt the dataset for every job "
              "that shares it.",
    fix="mount the dataset's claim read-only (read_only=True)", source="README.md (The platform)")

CLAIM_IN_ANOTHER_NAMESPACE = register(
    "KT414", "error", "claim in another namespace than the pod",
    rationale="A pod mounts PersistentVolumeClaims of its own namespace only: a claim defined in another namespace "
              "leaves the pod Pending with 'persistentvolumeclaim not found'.",
    fix="define the storage in the job's namespace (namespace= on FsxLustre, Efs or S3Bucket), or run the job there",
    source=VOLUMES)
PosixId = Annotated[int, Field(ge=0, le=2**31 - 1)]
_FSX_THROUGHPUT = {"PERSISTENT_1": {50, 100, 200, 12, 40}, "PERSISTENT_2": {125, 250, 500, 1000}}


class ClaimProps(StrictProps):
    name: Dns1123Label = Field(..., description="PersistentVolumeClaim name; defaults to the construct id.")
    namespace: Dns1123Label | None = Field(None, description="One of the cluster's namespaces; default: its first.")
    read_only: bool = Field(False, description="Mount read-only (ReadOnlyMany), e.g. for datasets.")


class FsxLustreProps(ClaimProps):
    """FSx for Lustre: a static PV of an existing file system (file_system_id, dns_name, mount_name), or a
    dynamically provisioned one (subnet_id, security_group_ids) through a StorageClass of its own."""

    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = "PERSISTENT_2"
    capacity_gib: int = Field(1200, gt=0, description="Storage capacity (see KT410 for the valid steps).")
    throughput: int | None = Field(None, description="perUnitStorageThroughput, MB/s per TiB (PERSISTENT_*); "
                                                     "default 125 for PERSISTENT_2, 200 for PERSISTENT_1.")
    file_system_id: FileSystemId | None = Field(None, description="An existing file system (a static volume).")
    dns_name: str | None = Field(None, description="Its DNSName: <file_system_id>.fsx.<region>.amazonaws.com.")
    mount_name: FsxMountName | None = Field(None, description="Its MountName (8 characters; 'fsx' for SCRATCH_1).")
    subnet_id: SubnetId | None = Field(None, description="Where a new file system is created.")
    security_group_ids: list[SecurityGroupId] = Field(default_factory=list,
                                                      description="The new file system's security groups.")

    @model_validator(mode="after")
    def _consistent(self) -> FsxLustreProps:
        static = [self.file_system_id, self.dns_name, self.mount_name]
        if any(static) and not all(static):
            raise rule_violation("KT002", "a static FSx volume needs file_system_id, dns_name and mount_name",
                                 "give all three (or none, and subnet_id for a new file system)",
                                 field="file_system_id")
        dns = re.compile(rf"^{re.escape(self.file_system_id or '')}\.fsx\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
        if self.dns_name and not ((match := dns.match(self.dns_name)) and REGION.match(match.group(1))):
            raise rule_violation(INVALID_VALUE, f"{self.dns_name!r} is not the DNS name of {self.file_system_id}",
                                 f"use the file system's DNSName, {self.file_system_id}.fsx.<region>.amazonaws.com",
                                 field="dns_name")
        if not any(static) and not (self.subnet_id and self.security_group_ids):
            raise rule_violation("KT002", "a new FSx file system needs subnet_id and security_group_ids",
                                 "give them, or file_system_id, dns_name and mount_name of an existing one",
                                 field="subnet_id")
        step = 3600 if self.deployment_type == "SCRATCH_1" else 2400
        if self.capacity_gib not in (1200, 2400) and self.capacity_gib % step:
            raise rule_violation(FSX_CAPACITY.code, f"{self.capacity_gib} GiB is not a size FSx creates for "
                                 f"{self.deployment_type}", f"use 1200, 2400 or a multiple of {step} GiB",
                                 field="capacity_gib")
        allowed = _FSX_THROUGHPUT.get(self.deployment_type, set())
        if self.throughput is not None and self.throughput not in allowed:
            raise rule_violation(FSX_THROUGHPUT.code, f"throughput {self.throughput} is not valid for "
                                 f"{self.deployment_type}", f"use one of {sorted(allowed)}" if allowed else
                                 "leave throughput out for scratch file systems", field="throughput")
        return self

    @property
    def per_unit_throughput(self) -> int | None:
        defaults = {"PERSISTENT_1": 200, "PERSISTENT_2": 125}
        return self.throughput or defaults.get(self.deployment_type)


class EfsProps(ClaimProps):
    """EFS through access points: a StorageClass (provisioningMode efs-ap) and a claim; each claim gets its
    own access point and directory."""

    file_system_id: FileSystemId
    directory_perms: str = Field("700", pattern=r"^[0-7]{3,4}$")
    gid_range: tuple[PosixId, PosixId] | None = Field(None, description="gidRangeStart/End for the access points' "
                                                                        "POSIX ids (both or neither).")
    base_path: AbsolutePath | None = Field(None, description="Directory the access points are created under.")

    @model_validator(mode="after")
    def _gid_range_ordered(self) -> EfsProps:
        if self.gid_range and self.gid_range[0] > self.gid_range[1]:
            raise rule_violation(INVALID_VALUE, f"gid_range starts at {self.gid_range[0]}, after its end "
                                 f"{self.gid_range[1]}", "give (start, end) with start <= end", field="gid_range")
        return self


class S3BucketProps(ClaimProps):
    """An S3 bucket through Mountpoint (static provisioning only: a PV and a PVC, storageClassName '')."""

    bucket_name: str = Field(..., description="The bucket's name (S3's naming rules; a directory bucket's ends "
                                              "with --<zone id>--x-s3).")
    region: Region | None = Field(None, description="The bucket's region, e.g. us-west-2. Default: Mountpoint "
                                                    "finds it.")
    prefix: str | None = Field(None, pattern=r"^[^/].*/$",
                               description="Only keys under this prefix: relative, ending with '/', e.g. 'data/'.")
    bucket_type: Literal["general-purpose", "directory"] = Field(
        "general-purpose", description="Directory buckets (S3 Express One Zone) support rename through Mountpoint.")
    read_only: bool = Field(True, description="Mountpoint mounts read-only by default here; read-write allows "
                                              "new files and deletes, never changes to existing files.")
    capacity: PositiveByteQuantity = Field("1Ti", description="Nominal size (S3 ignores it; Kubernetes needs a "
                                                              "positive one).")

    @model_validator(mode="after")
    def _bucket_name_of_its_type(self) -> S3BucketProps:
        problem = bucket_name_problem(self.bucket_name, self.bucket_type == "directory")
        if problem:
            raise rule_violation(INVALID_VALUE, f"{self.bucket_name!r} is not a valid {self.bucket_type} bucket "
                                 f"name: {problem}", "use the bucket's exact name (S3's bucket naming rules), and "
                                 "bucket_type 'directory' only for S3 Express One Zone buckets", field="bucket_name")
        return self


class Claim(PlatformConstruct):
    """A PersistentVolumeClaim in a namespace, and what backs it: the type a job's volumes take (use FsxLustre,
    Efs or S3Bucket)."""

    shared = True  # every backend here is network storage that pods on many nodes mount
    persistent = True  # reclaimPolicy Retain: the data outlives pods, claims and jobs

    def __init__(self, scope: Cluster, id: str, props: Any, kwargs: dict[str, Any]):
        super().__init__(scope, id, props, kwargs)
        self.namespace, problems = scope.check_namespace(self.props.namespace)
        problems += scope.claim(self.namespace, {f"pvc/{self.props.name}": "name"}, f"claim {self.props.name}")
        self._emit(problems, self._manifests() if not problems else None)

    @property
    def claim_name(self) -> str:
        return self.props.name

    @property
    def read_only(self) -> bool:
        return self.props.read_only

    @property
    def supports_rename(self) -> bool:
        return True

    @property
    def access_mode(self) -> str:
        return "ReadOnlyMany" if self.read_only else "ReadWriteMany"

    @property
    def pv_name(self) -> str:
        """Cluster-wide name of a static volume: the namespace keeps two namespaces' claims apart."""
        return f"{self.namespace}-{self.claim_name}"

    def volume(self, name: str | None = None) -> dict[str, Any]:
        """The pod's volume entry (name defaults to the claim's)."""
        claim: dict[str, Any] = {"claimName": self.claim_name}
        if self.read_only:
            claim["readOnly"] = True
        return {"name": name or self.claim_name, "persistentVolumeClaim": claim}

    def volume_mount(self, mount_path: str, name: str | None = None) -> dict[str, Any]:
        """The container's volumeMounts entry for `volume(name)` at `mount_path`."""
        mount: dict[str, Any] = {"name": name or self.claim_name, "mountPath": mount_path}
        if self.read_only:
            mount["readOnly"] = True
        return mount

    def _claim(self, size: str, storage_class: str, volume_name: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"accessModes": [self.access_mode], "storageClassName": storage_class,
                                "resources": {"requests": {"storage": size}}}
        if volume_name:
            spec["volumeName"] = volume_name
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": self.claim_name, "namespace": self.namespace}, "spec": spec}

    def _static_volume(self, size: str, csi: dict[str, Any], mount_options: list[str]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "capacity": {"storage": size}, "accessModes": [self.access_mode], "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem", "csi": csi,
            # Bind only to this claim, so no other claim in another namespace takes the volume first.
            "claimRef": {"namespace": self.namespace, "name": self.claim_name}}
        if mount_options:
            spec["mountOptions"] = mount_options
        return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": self.pv_name}, "spec": spec}

    def _manifests(self) -> list[dict[str, Any]]:
        raise NotImplementedError


class FsxLustre(Claim):
    """FSx for Lustre (fsx.csi.aws.com): POSIX, renames, survives pods: the place for checkpoints."""

    Props = FsxLustreProps
    kind = "fsx"

    def __init__(self, scope: Cluster, id: str, props: FsxLustreProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)

    def _manifests(self) -> list[dict[str, Any]]:
        p, size = self.props, f"{self.props.capacity_gib}Gi"
        if p.file_system_id:
            csi = {"driver": "fsx.csi.aws.com", "volumeHandle": p.file_system_id,
                   "volumeAttributes": {"dnsname": p.dns_name, "mountname": p.mount_name}}
            return [self._static_volume(size, csi, ["flock"]), self._claim(size, "", self.pv_name)]
        parameters = {"subnetId": p.subnet_id, "securityGroupIds": ",".join(p.security_group_ids),
                      "deploymentType": p.deployment_type}
        if p.per_unit_throughput:
            parameters["perUnitStorageThroughput"] = str(p.per_unit_throughput)
        storage_class = {"apiVersion": STORAGE_API_VERSION, "kind": "StorageClass",
                         "metadata": {"name": f"fsx-{self.pv_name}"}, "provisioner": "fsx.csi.aws.com",
                         "parameters": parameters, "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate",
                         "mountOptions": ["flock"]}
        return [storage_class, self._claim(size, f"fsx-{self.pv_name}")]


class Efs(Claim):
    """EFS (efs.csi.aws.com) through an access point per claim: elastic, NFS semantics, renames."""

    Props = EfsProps
    kind = "efs"

    def __init__(self, scope: Cluster, id: str, props: EfsProps | Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(scope, id, props, kwargs)

    def _manifests(self) -> list[dict[str, Any]]:
        p = self.props
        parameters = {"provisioningMode": "efs-ap", "fileSystemId": p.file_system_id,
                      "directoryPerms": p.directory_perms}
        if p.gid_range:
            parameters.update(gidRangeStart=str(p.gid_range[0]), gidRangeEnd=str(p.gid_range[1]))
        if p.base_path:
            parameters["basePath"] = p.base_path
        storage_class = {"apiVersion": STORAGE_API_VERSION, "kind": "StorageClass",
                         "metadata": {"name": f"efs-{self.pv_name}"}, "provisioner": "efs.csi.aws.com",
                         "parameters": parameters, "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}
        # EFS is elastic; the request is nominal but Kubernetes requires one.
        return [storage_class, self._claim("5Gi", f"efs-{self.pv_name}")]


class S3Bucket(Claim):
    """An S3 bucket through Mountpoint (s3.csi.aws.com): fast sequential reads for datasets; no renames on
    general-purpose buckets (so no DCP checkpoints there), no changes to existing files."""

    Props = S3BucketProps
    kind = "s3"

    def __init__(self, scope: Cluster, id: str, props: S3BucketProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)

    @property
    def supports_rename(self) -> bool:
        return self.props.bucket_type == "directory"

    def _manifests(self) -> list[dict[str, Any]]:
        p = self.props
        options = [] if p.read_only else ["allow-delete"]
        options += [f"region {p.region}"] if p.region else []
        options += [f"prefix {p.prefix}"] if p.prefix else []
        csi = {"driver": "s3.csi.aws.com", "volumeHandle": f"s3-{self.pv_name}",
               "volumeAttributes": {"bucketName": p.bucket_name}}
        if p.read_only:
            csi["readOnly"] = True
        return [self._static_volume(p.capacity, csi, options), self._claim(p.capacity, "", self.pv_name)]


def checkpoint_volume_problems(claim: Claim, path: str = "checkpoint_dir") -> list[Problem]:
    """KT412: why `claim` cannot hold DCP checkpoints (empty when it can)."""
    why = ("is mounted read-only" if claim.read_only else
           "does not outlive the pod" if not claim.persistent else
           f"cannot rename files ({type(claim).__name__} {claim.claim_name}), which DCP does with its metadata"
           if not claim.supports_rename else None)
    return [Problem(CHECKPOINT_VOLUME.code, path, f"the checkpoint volume {why}", CHECKPOINT_VOLUME.fix)] if why else []


def dataset_volume_problems(claim: Claim, path: str = "volumes") -> list[Problem]:
    """KT413: a dataset's claim mounted read-write."""
    if claim.read_only:
        return []
    return [Problem(DATASET_READ_WRITE.code, path, f"dataset claim {claim.claim_name} is mounted read-write",
                    DATASET_READ_WRITE.fix)]


def claim_namespace_problems(claim: Claim, namespace: str, path: str) -> list[Problem]:
    """KT414 when a pod of `namespace` would mount `claim` of another namespace."""
    if claim.rejected or claim.namespace == namespace:
        return []
    return [Problem(CLAIM_IN_ANOTHER_NAMESPACE.code, path, f"claim {claim.claim_name} is in namespace "
                    f"{claim.namespace}, the pod in {namespace}", CLAIM_IN_ANOTHER_NAMESPACE.fix)]
