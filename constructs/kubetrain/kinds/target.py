"""What a launch target is: one operator's contract, in one module.

A target turns a validated job and its pod template into the operator's objects, says which
variables the operator injects and how torchrun finds its peers under it, checks what only that
operator cares about (name lengths, admission rules), and tells `kubetrain run-local` how to
emulate it from the committed YAML. Nothing outside a target's module knows its kind, replica
types, container name or variables. A target is found by its kind's descriptor (kubetrain.kinds:
`Kind.target`). What operators create from a committed object is plain data (kubetrain.model.created).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import ConfigDict

from kubetrain.model.job_request import JobRequest
from kubetrain.rules.registry import register
from kubetrain.rules.sources import PYTORCHJOB, TRAINER, cite
from kubetrain_runtime.failures import PERMANENT_EXITS
from kubetrain_runtime.problems import Problem, ReportedLater


@dataclass
class LocalReplica:
    """One pod of a committed job, as run-local starts it."""

    name: str  # e.g. master-0: unique within the job
    template: dict[str, Any]  # the pod template from the manifest
    restart_policy: str  # the operator's policy for this pod (see restart_after)
    env: dict[str, str] = field(default_factory=dict)  # what the operator injects, addresses on loopback


@dataclass
class LocalPlan:
    """How run-local runs a committed job: its pods and the operator's restart rules."""

    replicas: list[LocalReplica]
    container_name: str  # the container that runs the workload
    backoff_limit: int  # pod restarts before the job fails: over all pods, or each pod's own with per_pod_backoff
    fail_job_exit_codes: set[int] = field(default_factory=set)  # exits that fail the job at once (podFailurePolicy)
    per_pod_backoff: bool = False
    # The object whose status.trainerStatus the operator's status endpoint updates (Kubeflow Trainer's
    # TrainJobStatus): run-local serves that endpoint and hands the pods its variables (kubetrain_runtime/progress.py).
    status_object: dict[str, Any] | None = None


class Target(ReportedLater, ABC):
    """Base of every launch target. Subclasses are pydantic models: their fields are the operator's options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ClassVar[str]  # what users and docs call it, e.g. "pytorchjob"
    api_version: ClassVar[str]
    kind: ClassVar[str]
    container_name: ClassVar[str]  # the container that runs the workload

    # -- compiling a job ------------------------------------------------------------------------

    @abstractmethod
    def injected_env(self, job: JobRequest) -> set[str]:
        """Variables the operator sets in the workload's container: users must not set them (KT105)."""

    def env_owner(self, name: str) -> str:
        """Who sets an injected variable, for KT105's message."""
        return f"the {self.kind} operator"

    @abstractmethod
    def rendezvous_args(self, job: JobRequest) -> list[str]:
        """torchrun flags that find the peers under this operator (beyond those it reads from PET_*)."""

    @abstractmethod
    def rendezvous_port(self, job: JobRequest) -> int:
        """The port the first pod's torchrun listens on for its peers (the rendezvous endpoint)."""

    def launch_env(self, job: JobRequest) -> dict[str, str]:
        """Variables the target itself must set for torchrun (for operators that set none)."""
        return {}

    @abstractmethod
    def max_name_length(self, job: JobRequest) -> tuple[int, str]:
        """(longest job name the operator's derived names allow, an example of the longest derived name)."""

    def check(self, job: JobRequest) -> Iterator[Problem]:
        """Problems only this operator has with the job (admission rules)."""
        return iter(())

    def derived_names(self, job: JobRequest) -> list[str]:
        """Names the target's objects take in the job's namespace, besides the job's own name."""
        return []

    @abstractmethod
    def owned_pod_labels(self, job: JobRequest) -> frozenset[str]:
        """Pod labels the operator or the Job controller sets (or selects pods by): not the user's to set (KT134)."""

    @abstractmethod
    def render(self, job: JobRequest, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        """The operator's objects for the job, as plain manifests."""

    # -- running a committed job locally (from YAML, never from Python) -------------------------

    @classmethod
    @abstractmethod
    def local_plan(cls, manifest: dict[str, Any], loopback_port: Callable[[], int],
                   sibling: Callable[[str, str], dict[str, Any] | None]) -> LocalPlan:
        """The pods of the committed `manifest`, with the environment the operator would inject.
        `loopback_port()` returns a free local port for each address the operator would hand out;
        `sibling(kind, name)` reads another committed object of the job's namespace (a runtime, say)."""


def restart_after(policy: str, exit_code: int, fail_job_exit_codes: set[int] = frozenset()) -> bool:
    """Whether the operator restarts (or replaces) a pod whose container exited with `exit_code`.

    `ExitCode`: 1-127 are permanent errors (kubetrain's launcher exits 2, 3 or 4 for its permanent failures),
    128-255 retryable (signals, a stopped pod's 143, and the launcher's "ranks kept failing" 200); shared by
    the Kubeflow operators. `Retry`: a batch Job's pod, replaced
    after any failure its podFailurePolicy does not end the job for.
    """
    if exit_code == 0 or exit_code in fail_job_exit_codes:
        return False
    return {"Always": True, "OnFailure": True, "Retry": True, "Never": False,
            "ExitCode": exit_code >= 128}.get(policy, False)


def pod_failure_policy(container: str) -> dict[str, Any]:
    """A batch Job's podFailurePolicy for a kubetrain workload: the launcher's permanent exits (a bad config,
    unusable checkpoint storage, a run that keeps diverging: kubetrain_runtime/failures.py) fail the job at once; a
    pod disrupted by Kubernetes (preemption, eviction, a drained node) is no failure of the job and does not
    count against its backoff limit; anything else (ranks that kept failing, a stop signal) is retried."""
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "In",
                                              "values": list(PERMANENT_EXITS)}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def fail_job_exit_codes(job_spec: dict[str, Any], container: str) -> set[int]:
    """The exit codes a batch Job's podFailurePolicy turns into a failed job at once."""
    codes: set[int] = set()
    for rule in (job_spec.get("podFailurePolicy") or {}).get("rules", []):
        exits = rule.get("onExitCodes")
        if rule.get("action") == "FailJob" and exits and exits.get("operator") == "In" and \
                exits.get("containerName", container) == container:
            codes |= set(exits.get("values", []))
    return codes


NOT_ON_THIS_TARGET = register(
    "KT701", "error", "the job needs what its target cannot do",
    rationale="Targets differ: only PyTorchJob has elastic membership, and operators that inject only torchrun's "
              "PET_* variables need torchrun to read them.",
    fix="choose a target that has the feature, or drop the feature", source=cite(PYTORCHJOB, TRAINER),
    targets=("trainjob", "indexed-job"))
