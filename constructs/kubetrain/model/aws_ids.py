"""AWS identifiers as pydantic types: a typo in a subnet, a role given as an ARN, a zone without its letter.

Karpenter and the CSI drivers pass these to EC2, IAM, FSx and S3 only when a node or a volume is created,
so a malformed one fails minutes after the sync, in a controller's log. Each type checks the format AWS
documents (EC2 resource ids: a prefix and 8 or 17 lowercase hex digits; IAM role names; region and zone
names) and says what a valid one looks like. Sources: EC2 resource ids
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/resource-ids.html), IAM names
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html), S3 bucket naming rules
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import AfterValidator

from kubetrain_runtime.problems import INVALID_VALUE, rule_violation

_REGION = r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]"
REGION = re.compile(rf"^{_REGION}$")
ZONE = re.compile(rf"^({_REGION})[a-z]$")  # us-west-2a: the region, then the zone's letter
_IAM_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
_DIRECTORY_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,}[a-z0-9]--[a-z0-9]+-az[0-9]+--x-s3$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _ec2_id(prefix: str, what: str, hex_lengths: tuple[int, ...] = (8, 17)) -> Any:
    digits = "|".join(f"[0-9a-f]{{{n}}}" for n in hex_lengths)
    pattern = re.compile(rf"^{prefix}-({digits})$")
    example = f"{prefix}-0123456789abcdef0" if 17 in hex_lengths else f"{prefix}-0123abcd"

    def check(value: str) -> str:
        if not pattern.match(value):
            lengths = " or ".join(map(str, hex_lengths))
            raise rule_violation(INVALID_VALUE, f"{value!r} is not {what} id",
                                 f"use the id AWS shows: '{prefix}-' and {lengths} lowercase hex digits, e.g. "
                                 f"{example}")
        return value

    return Annotated[str, AfterValidator(check)]


SubnetId = _ec2_id("subnet", "a subnet")
SecurityGroupId = _ec2_id("sg", "a security group")
CapacityReservationId = _ec2_id("cr", "a capacity reservation", (17,))
FileSystemId = _ec2_id("fs", "an FSx or EFS file system")


def _zone(value: str) -> str:
    if not ZONE.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not an availability zone name",
                             "use the zone's name: its region and a letter, e.g. us-west-2a (Karpenter matches the "
                             "topology.kubernetes.io/zone label, which carries the name, not the zone id)")
    return value


def _region(value: str) -> str:
    if not REGION.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not an AWS region", "use a region code, e.g. us-west-2")
    return value


def _role_name(value: str) -> str:
    if not value:  # EC2NodeClass's CEL rule on spec.role: `self != ''`
        raise rule_violation(INVALID_VALUE, "role cannot be empty (Karpenter's EC2NodeClass refuses it)",
                             "name the nodes' IAM role, e.g. KarpenterNodeRole-prod")
    if value.startswith("arn:"):
        raise rule_violation(INVALID_VALUE, f"{value!r} is a role ARN; Karpenter's EC2NodeClass takes the role's "
                             "name", f"use the part after 'role/': {value.rpartition('/')[2]!r}")
    if not _IAM_NAME.match(value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not an IAM role name",
                             "use 1-64 letters, digits and '+=,.@_-' (the role's name, e.g. KarpenterNodeRole-prod)")
    return value


def _placement_group(value: str) -> str:
    if not 1 <= len(value) <= 255 or not value.isascii() or not value.isprintable():
        raise rule_violation(INVALID_VALUE, f"{value!r} is not a placement group name",
                             "use the group's name: 1-255 printable ASCII characters")
    return value


def _fsx_mount_name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9]{8}|fsx", value):
        raise rule_violation(INVALID_VALUE, f"{value!r} is not an FSx for Lustre mount name",
                             "use the file system's MountName from `aws fsx describe-file-systems` (8 lowercase "
                             "letters and digits; 'fsx' for SCRATCH_1)")
    return value


def bucket_name_problem(name: str, directory: bool) -> str | None:
    """Why `name` is not a valid bucket name of its kind (S3's naming rules), None when it is."""
    if directory:
        return None if _DIRECTORY_BUCKET.match(name) else (
            "a directory bucket's name ends with --<zone id>--x-s3, e.g. corp-data--usw2-az1--x-s3")
    if not _BUCKET.match(name):
        return "3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
    if ".." in name or ".-" in name or "-." in name:
        return "no two dots, and no dot next to a hyphen"
    try:
        ipaddress.IPv4Address(name)
        return "not formatted as an IP address"
    except ValueError:
        pass
    for prefix in ("xn--", "sthree-", "amzn-s3-demo-"):
        if name.startswith(prefix):
            return f"not starting with {prefix}"
    for suffix in ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"):
        if name.endswith(suffix):
            return f"not ending with {suffix} (reserved)"
    return None


AvailabilityZone = Annotated[str, AfterValidator(_zone)]
Region = Annotated[str, AfterValidator(_region)]
IamRoleName = Annotated[str, AfterValidator(_role_name)]
PlacementGroupName = Annotated[str, AfterValidator(_placement_group)]
FsxMountName = Annotated[str, AfterValidator(_fsx_mount_name)]


def region_of_zone(zone: str) -> str:
    """us-west-2a -> us-west-2 (for a valid zone name)."""
    return zone[:-1]
