"""The NCCL/EFA profile of an image, the environment derived from it, and the judgement of a job's own.

Two sources disagree: AWS's EKS distributed-training guides have a must-set and a must-not-set list
written for old images; aws-ofi-nccl (>= 1.7) sets the EFA provider, device RDMA
and fork safety itself and says that forcing NCCL's algorithm or protocol disables its tuner. A
profile names the versions the image ships, and each piece of guidance is honoured where it applies:

    guide's item                     kubetrain
    FI_PROVIDER=efa                  set for aws-ofi-nccl < 1.7 (needed <= 1.5) and when no profile says
                                     which plugin the image has (harmless from 1.7 on)
    FI_EFA_USE_HUGE_PAGE=0           not set: EFA pods get 2 MiB huge pages, which the provider uses (KT118)
    NCCL_TIMEOUT, TORCH_DISTRIBUTED_TIMEOUT   not set: torch and NCCL read neither (NCCL's env docs);
                                     KT116 names the setting that works
    NCCL_NVLS_ENABLE=0               set for NCCL < 2.18.5; a tuning choice from there on
    PYTORCH_CUDA_ALLOC_CONF          expandable_segments:True (both sources agree)
    TRITON_CACHE_DIR on local disk   every GPU job's: an emptyDir on the node (kubetrain.jobs.pod)
    NCCL_SOCKET_IFNAME               an exclusion list, never eth0 (not the EFA path on p4d/p5)
    NCCL_TUNER_PLUGIN                only for aws-ofi-nccl 1.13-1.15, which need it named
    hostNetwork + ClusterFirstWithHostNet   an explicit choice (`host_network`), off by default as in
                                     AWS's reference manifests; it needs a privileged namespace (KT430)

`environment_problems` is the one place a job's own variables are judged, by value and not just by
name (NCCL_P2P_DISABLE=0 is fine, =1 is not); the rules it reports are declared here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator

from kubetrain.model.strict import StrictProps
from kubetrain.rules.registry import register
from kubetrain.rules.sources import CUDA_ENV, EFA_ENV, EKS_EFA, NCCL_ENV, PG, TUNER, cite
from kubetrain_runtime.problems import INVALID_VALUE, Problem, rule_violation

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.-]+)?$")
SOCKET_EXCLUSIONS = "^lo,docker,veth,pod-id-link0"
EFA_HUGEPAGES_DEFAULT = "5120Mi"  # AWS's NCCL-test manifests' figure, for EFA pods on no pool that says otherwise


def parse_version(text: str) -> tuple[int, int, int]:
    """'1.14.2', 'v1.13.0-aws', '2.26.2-1' -> (major, minor, patch); ValueError otherwise."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a version like 1.14.0")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _check_version(value: str) -> str:
    try:
        parse_version(value)
    except ValueError as error:
        raise rule_violation(INVALID_VALUE, str(error), "give the version the image ships, e.g. 1.14.0") from None
    return value


# NCCL's own spellings (src/debug.cc, v2.26): a value it does not know is ignored without a word, so a typo
# turns the log one waits for into none.
NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")
NCCL_DEBUG_SUBSYSTEMS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL", "PROXY",
                         "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "ALL")
NCCL_LOG_NAME = "nccl.%h.%p.log"  # NCCL expands %h (the host: the pod's name) and %p (the rank's pid)


class NcclDebug(StrictProps):
    """NCCL's own log, as typed settings: what NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE say."""

    level: Literal["VERSION", "WARN", "INFO", "ABORT", "TRACE"] = Field(
        "INFO", description="NCCL_DEBUG. INFO prints the transport each channel uses (NET/OFI: EFA) and init "
                            "details; TRACE needs an NCCL built with tracing.")
    subsystems: list[Literal["INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL",
                             "PROXY", "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "ALL"]] = Field(
        default_factory=list, description="NCCL_DEBUG_SUBSYS: only these subsystems log (NCCL's default when "
                                          "empty: INIT, BOOTSTRAP, ENV).")
    exclude_subsystems: bool = Field(False, description="Log every subsystem but `subsystems` (NCCL's ^ form).")
    log_dir: str | None = Field(None, pattern=r"^/", description="Write each rank's log to its own file in this "
                                                                 "folder (NCCL_DEBUG_FILE, nccl.<pod>.<pid>.log) "
                                                                 "instead of stdout; it must be on one of the "
                                                                 "job's volumes, or the logs go with the pod.")

    def environment(self) -> dict[str, str]:
        env = {"NCCL_DEBUG": self.level}
        if self.subsystems:
            env["NCCL_DEBUG_SUBSYS"] = ("^" if self.exclude_subsystems else "") + ",".join(self.subsystems)
        if self.log_dir:
            env["NCCL_DEBUG_FILE"] = f"{self.log_dir.rstrip('/')}/{NCCL_LOG_NAME}"
        return env


class NcclProfile(StrictProps):
    """The communication stack of a job's image. Frozen and strict like every input."""

    aws_ofi_nccl: str = Field(..., description="aws-ofi-nccl version in the image, e.g. '1.14.0'.")
    nccl: str = Field(..., description="NCCL version in the image, e.g. '2.26.2'.")
    host_network: bool = Field(False, description="Run pods on the host's network (AWS's EKS guides' choice). Off "
                                                  "by default: AWS's reference manifests use the pod network, and "
                                                  "hostNetwork needs a namespace at Pod Security 'privileged'.")
    tuner_plugin: str = Field("libnccl-ofi-tuner.so", description="The tuner library as the image installs it; "
                                                                  "named in NCCL_TUNER_PLUGIN for 1.13-1.15 only.")

    debug: NcclDebug | None = Field(None, description="NCCL's log (level, subsystems, a file per rank on a "
                                                      "volume), on every GPU job with this profile. Default: "
                                                      "NCCL's own (warnings only, to stdout).")

    _versions = field_validator("aws_ofi_nccl", "nccl")(_check_version)

    @property
    def plugin_version(self) -> tuple[int, int, int]:
        return parse_version(self.aws_ofi_nccl)

    @property
    def nccl_version(self) -> tuple[int, int, int]:
        return parse_version(self.nccl)

    @property
    def needs_tuner_plugin(self) -> bool:
        return (1, 13, 0) <= self.plugin_version < (1, 16, 0)

    def environment(self) -> dict[str, str]:
        """The variables an EFA job's containers get (every GPU job also gets a node-local TRITON_CACHE_DIR)."""
        env = {"NCCL_SOCKET_IFNAME": SOCKET_EXCLUSIONS, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
        if self.plugin_version < (1, 7, 0):
            env["FI_PROVIDER"] = "efa"
        if self.needs_tuner_plugin:
            env["NCCL_TUNER_PLUGIN"] = self.tuner_plugin
        if self.nccl_version < (2, 18, 5):
            env["NCCL_NVLS_ENABLE"] = "0"
        return env

    def pod_fields(self) -> dict[str, object]:
        """Pod spec fields of the network choice."""
        return {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"} if self.host_network else {}


# An EFA job whose image's stack is not named: what is right for every aws-ofi-nccl the seeds and AWS's
# images ship. FI_PROVIDER=efa is needed up to 1.5 and harmless after; the version-dependent items
# (NCCL_NVLS_ENABLE, NCCL_TUNER_PLUGIN) need a profile.
UNNAMED_STACK_ENV = {"FI_PROVIDER": "efa", "NCCL_SOCKET_IFNAME": SOCKET_EXCLUSIONS,
                     "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def efa_environment(profile: NcclProfile | None) -> dict[str, str]:
    """The variables an EFA job's containers get: the profile's, or the unnamed stack's."""
    return profile.environment() if profile is not None else dict(UNNAMED_STACK_ENV)


# -- the job's own environment ------------------------------------------------------------------------------

BREAKS_EFA = register(
    "KT106", "error", "environment value that breaks EFA jobs",
    rationale="Forcing NCCL's algorithm or protocol disables the aws-ofi-nccl tuner; pinning the socket interface "
              "to eth0 breaks p4d/p5, where it is not the EFA path; turning device RDMA or fork safety off routes "
              "GPU traffic through host memory or corrupts registered memory after a fork.",
    fix="remove the variable (kubetrain sets an interface exclusion list; aws-ofi-nccl >= 1.7 sets the rest)",
    source=cite(EFA_ENV, EKS_EFA, NCCL_ENV))
PROVIDER_NOT_EFA = register(
    "KT126", "error", "FI_PROVIDER other than efa on an EFA job",
    rationale="libfabric then never opens the EFA device and NCCL runs over TCP.",
    fix="remove FI_PROVIDER (the plugin or kubetrain sets efa) or set it to efa",
    source=EFA_ENV)
DEBUG_SWITCH = register(
    "KT115", "error", "debugging switch that cripples a GPU job",
    rationale="CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch; NCCL_P2P_DISABLE=1 cuts NVLink out of "
              "every collective inside the node. Both are for debugging, not training.",
    fix="remove the variable (or set it to 0)", source=cite(NCCL_ENV, CUDA_ENV))
UNREAD_TIMEOUT = register(
    "KT116", "warning", "timeout variable that nothing reads",
    rationale="torch reads neither NCCL_TIMEOUT nor TORCH_DISTRIBUTED_TIMEOUT and NCCL has no NCCL_TIMEOUT; "
              "the collective timeout is init_process_group(timeout=...).",
    fix="remove it; set run.resilience.collective_timeout_s (kubetrain's trainer) or the program's own flag "
        "(Megatron-LM: --distributed-timeout-minutes)",
    source=cite(NCCL_ENV, PG))
TUNER_NOT_NEEDED = register(
    "KT127", "warning", "NCCL_TUNER_PLUGIN named for an aws-ofi-nccl that does not need it",
    rationale="Only aws-ofi-nccl 1.13-1.15 need their tuner named; other versions load it themselves, and a name "
              "that is wrong for the image makes NCCL fall back to its default tuning.",
    fix="remove NCCL_TUNER_PLUGIN (kubetrain names the tuner where the profile's version needs it)",
    source=TUNER)

# name -> (what setting it does, the values that are harmless)
_EFA_BREAKERS: dict[str, tuple[str, frozenset[str]]] = {
    "NCCL_ALGO": ("forcing NCCL's algorithm disables the aws-ofi-nccl tuner", frozenset()),
    "NCCL_PROTO": ("forcing NCCL's protocol disables the aws-ofi-nccl tuner", frozenset()),
    # AWS's EKS guides list both as must-not-set: aws-ofi-nccl >= 1.7 sets them from what the instance supports,
    # and a hand-set value overrides it (device RDMA forced on where the instance has none, fork safety off).
    "FI_EFA_USE_DEVICE_RDMA": ("aws-ofi-nccl enables device RDMA itself where the instance supports it; forced "
                               "on it breaks instances without GPUDirect RDMA, forced off it routes GPU traffic "
                               "through host memory", frozenset()),
    "FI_EFA_FORK_SAFE": ("aws-ofi-nccl sets fork safety itself; turned off, registered memory can be corrupted "
                         "after a fork (data loaders)", frozenset()),
}
# NCCL_NET picks the network plugin by name (case-insensitive): the aws-ofi-nccl plugin answers to
# "AWS Libfabric" in every version and also to "Libfabric" and "OFI" from 1.12; NCCL's own "IB" and
# "Socket" never use EFA.
_EFA_PLUGIN_NAMES = ("AWS Libfabric", "Libfabric", "OFI")
_DEBUG_SWITCHES = {"CUDA_LAUNCH_BLOCKING": "synchronous kernel launches serialise every kernel",
                   "NCCL_P2P_DISABLE": "intra-node traffic goes through host memory instead of NVLink"}
_UNREAD = ("NCCL_TIMEOUT", "TORCH_DISTRIBUTED_TIMEOUT")

NCCL_DEBUG_VALUE = register(
    "KT170", "error", "NCCL debug variable with a value NCCL does not know",
    rationale="NCCL ignores a level or subsystem it does not know without a word (src/debug.cc): NCCL_DEBUG=INFOS "
              "or NCCL_DEBUG_SUBSYS=NETWORK logs nothing, and the run one restarted to debug is spent.",
    fix="use NcclProfile(debug=NcclDebug(...)), or one of NCCL's own spellings (levels: "
        f"{', '.join(NCCL_DEBUG_LEVELS)}; subsystems: {', '.join(NCCL_DEBUG_SUBSYSTEMS)})",
    source=cite(NCCL_ENV, "https://github.com/NVIDIA/nccl/blob/v2.26.2-1/src/debug.cc"))


def nccl_debug_problems(env: Mapping[str, str]) -> list[Problem]:
    """KT170 for NCCL_DEBUG and NCCL_DEBUG_SUBSYS values NCCL would ignore (case does not matter to NCCL)."""
    problems = []
    level = env.get("NCCL_DEBUG")
    if level is not None and level.strip().upper() not in NCCL_DEBUG_LEVELS:
        problems.append(Problem(NCCL_DEBUG_VALUE.code, "env.NCCL_DEBUG", f"NCCL_DEBUG={level} is not a level NCCL "
                                f"knows: it logs nothing", f"use one of {', '.join(NCCL_DEBUG_LEVELS)}"))
    subsystems = env.get("NCCL_DEBUG_SUBSYS")
    if subsystems is not None:
        unknown = [s for s in subsystems.strip().lstrip("^").split(",") if s.upper() not in NCCL_DEBUG_SUBSYSTEMS]
        if unknown:
            problems.append(Problem(NCCL_DEBUG_VALUE.code, "env.NCCL_DEBUG_SUBSYS", f"NCCL knows no subsystem "
                                    f"{', '.join(map(repr, unknown))}: NCCL ignores it",
                                    f"use names from {', '.join(NCCL_DEBUG_SUBSYSTEMS)}, comma-separated "
                                    "(a leading ^ excludes them)"))
    return problems


def environment_problems(env: Mapping[str, str], *, gpus: bool, efa: bool,
                         profile: NcclProfile | None) -> list[Problem]:
    """Every problem with a job's own variables (`env`) on its hardware: KT106/KT126 on EFA jobs, KT115 on GPU
    jobs, KT116 and KT170 on any job, KT127 where the profile says the tuner needs no name. Paths are
    `env.<NAME>`."""
    problems: list[Problem] = nccl_debug_problems(env)
    for name, raw in env.items():
        value, path = raw.strip(), f"env.{name}"
        if efa and name in _EFA_BREAKERS and value not in _EFA_BREAKERS[name][1]:
            problems.append(Problem(BREAKS_EFA.code, path, f"{name}={raw} must not be set on an EFA job: "
                                    f"{_EFA_BREAKERS[name][0]}", f"remove {name}"))
        elif efa and name == "NCCL_SOCKET_IFNAME" and not value.startswith("^") and \
                "eth0" in value.lstrip("=").split(","):
            problems.append(Problem(BREAKS_EFA.code, path, f"pinning {value} breaks EFA instances, where eth0 is not "
                                    "the EFA path", f"remove it (kubetrain sets {SOCKET_EXCLUSIONS}) or use an "
                                    "exclusion list"))
        elif efa and name == "NCCL_NET" and value.lower() not in _plugin_names(profile):
            problems.append(Problem(BREAKS_EFA.code, path, f"NCCL_NET={raw} is not the name of the aws-ofi-nccl "
                                    "plugin: NCCL refuses to start, or (Socket) runs over TCP",
                                    "remove NCCL_NET (NCCL loads the plugin it finds) or set it to 'AWS Libfabric'"))
        elif efa and name == "FI_PROVIDER" and value != "efa":
            problems.append(Problem(PROVIDER_NOT_EFA.code, path, f"FI_PROVIDER={raw} keeps libfabric off EFA",
                                    PROVIDER_NOT_EFA.fix))
        elif efa and name == "NCCL_TUNER_PLUGIN" and profile is not None and not profile.needs_tuner_plugin:
            problems.append(Problem(TUNER_NOT_NEEDED.code, path, f"aws-ofi-nccl {profile.aws_ofi_nccl} loads its "
                                    "tuner itself (only 1.13-1.15 need it named)", TUNER_NOT_NEEDED.fix))
        elif gpus and name in _DEBUG_SWITCHES and value not in ("", "0"):
            problems.append(Problem(DEBUG_SWITCH.code, path, f"{name}={raw} on a GPU job: {_DEBUG_SWITCHES[name]}",
                                    DEBUG_SWITCH.fix))
        elif name in _UNREAD:
            problems.append(Problem(UNREAD_TIMEOUT.code, path, f"{name} is read by neither torch nor NCCL: it "
                                    "changes nothing", UNREAD_TIMEOUT.fix))
    return problems


def _plugin_names(profile: NcclProfile | None) -> set[str]:
    """NCCL_NET values that select aws-ofi-nccl in the image, lowercase."""
    if profile is not None and profile.plugin_version < (1, 12, 0):
        return {"aws libfabric"}
    return {name.lower() for name in _EFA_PLUGIN_NAMES}
