"""What a controller or operator creates from a committed object, as plain data: the object (`Created`), the pod
a controller makes from a template, and the Job controller's labels. The kinds say what they create
(kubetrain.kinds); the API server's checks (kubetrain.apiserver) judge it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# Kubernetes' Job controller labels a Job's pods with its generated selector (k8s 1.33 pkg/apis/batch/types.go):
# the Job's name and uid, and in Indexed mode the pod's completion index.
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_CONTROLLER_LABELS = frozenset((*JOB_NAME_LABELS, *JOB_UID_LABELS, JOB_INDEX_LABEL))


class Created(NamedTuple):
    """A built-in object a controller or operator creates from a committed object, as the API server gets it.

    Its problems are reported at their source in the committed object: a field of its template at
    `source` + the field's path (or as `paths` map it), its name and what the creator derives from names at
    `name_field`.
    """

    body: dict[str, Any]  # apiVersion, kind, metadata, spec: the object as created
    by: str  # who creates it, for messages: "the training operator", "JobSet"
    source: str = ""  # where its template is in the committed object ("" when it has none)
    # (its path prefix, the committed path it comes from) where that is not `source` + its path
    paths: tuple[tuple[str, str], ...] = ()
    # (a list of it, how many items come from the template): the creator appends the rest (a volume, a port)
    appended: tuple[tuple[str, int], ...] = ()
    name_field: str = "metadata.name"  # the committed field its name comes from
    template_labels: frozenset[str] = frozenset()  # its labels that come from the template; the rest are the creator's
    derived: frozenset[str] = frozenset()  # its fields the creator sets from names (spec.hostname, spec.subdomain)
    describe: str | None = None  # how messages name it, when its name says nothing (a runtime's Jobs)
    # Report only its problems at `paths`: the rest come from a template another committed object holds, whose
    # own check reports them (a TrainJob's overrides applied to its runtime's template).
    only_paths: bool = False


def pod_from_template(template: dict[str, Any], *, name: str | None = None, generate_name: str | None = None,
                      labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Pod a controller creates from `template`: its name, the template's labels and annotations with the
    controller's `labels` over them, and its spec with the controller's `spec` fields over it."""
    meta = template.get("metadata") or {}
    metadata: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    metadata["labels"] = {**(meta.get("labels") or {}), **(labels or {})}
    if meta.get("annotations"):
        metadata["annotations"] = meta["annotations"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {**(template.get("spec") or {}), **(spec or {})}}
