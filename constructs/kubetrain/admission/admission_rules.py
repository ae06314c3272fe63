"""The admission rules: a job its queue can never admit, or its pool can never hold.

Each is checked by verdict.py on the objects synth emits (and `kubetrain plan` reads back from dist/),
and reported on the job's own fields.
"""

from __future__ import annotations

from kubetrain.rules.registry import register
from kubetrain.rules.sources import cite

KUEUE = "https://github.com/kubernetes-sigs/kueue/blob/v0.19.2"
FLAVOR_ASSIGNER = f"{KUEUE}/pkg/scheduler/flavorassigner/flavorassigner.go"

POOL_TOO_SMALL = register(
    "KT440", "error", "job needs more nodes than its pool can ever have",
    rationale="Karpenter never grows a pool past its limit (max_nodes), and a static pool keeps exactly its "
              "static nodes whatever is pending; a gang that needs more nodes than that waits forever with its "
              "pods Pending. The pods per node come from the pool's allocatable figures, so a job whose pods "
              "share nodes is not refused.",
    fix="lower the job's nodes to what the pool holds, or raise the pool's max_nodes (static_nodes for a static "
        "pool)",
    source="https://karpenter.sh/docs/concepts/nodepools/#speclimits")
QUOTA_NEVER = register(
    "KT441", "error", "queue's quota can never admit the job",
    rationale="Kueue admits a workload only when every flavor-resource it is assigned fits the ClusterQueue's "
              "potentialAvailable: its nominal quota plus what its cohort tree can lend, within borrowing and "
              "lending limits. A gang larger than that in every flavor it can use is never admitted "
              "(ExceedsMaxQuota) and stays suspended.",
    fix="lower the job's nodes, or raise the queue's quotas (ClusterQueue quotas, a Cohort's quotas, or a "
        "borrowing_limit)",
    source=f"{FLAVOR_ASSIGNER} (fitsResourceQuota); {KUEUE}/pkg/cache/scheduler/resource_node.go "
           "(potentialAvailable)")
BORROWS = register(
    "KT442", "warning", "job fits its queue only by borrowing from a cohort",
    rationale="Past its ClusterQueue's nominal quota, Kueue admits the job only with quota the cohort lends "
              "while other queues leave it unused; it can wait for as long as they use it, and be preempted "
              "when they reclaim it.",
    fix="raise the queue's nominal quota if the job must start when submitted; otherwise this is expected",
    source=f"{FLAVOR_ASSIGNER} (fitsResourceQuota); {KUEUE}/pkg/scheduler/preemption/classical/"
           "hierarchical_preemption.go (FindHeightOfLowestSubtreeThatFits)")
QUEUE_ELSEWHERE = register(
    "KT443", "error", "job's LocalQueue or ClusterQueue does not exist where Kueue looks",
    rationale="Kueue looks for a job's kueue.x-k8s.io/queue-name in the job's own namespace, and for the "
              "LocalQueue's ClusterQueue among the cluster's; a job queued on a LocalQueue of another namespace "
              "stays suspended as inadmissible.",
    fix="queue the job on a LocalQueue of its own namespace (LocalQueue(namespace=...) pointing at the "
        "ClusterQueue)",
    source=f"{KUEUE}/pkg/controller/core/workload_controller.go (\"LocalQueue ... doesn't exist\", "
           "\"ClusterQueue ... doesn't exist\")")
NAMESPACE_EXCLUDED = register(
    "KT444", "error", "ClusterQueue's namespace selector excludes the job's namespace",
    rationale="A ClusterQueue admits workloads only from namespaces its namespaceSelector matches; a job whose "
              "LocalQueue points at one that excludes its namespace is never admitted.",
    fix="add the namespace to the ClusterQueue's namespaces, or queue the job on a ClusterQueue that admits it",
    source=cite("https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#namespace-selector",
                f"{KUEUE}/pkg/scheduler/scheduler.go (ValidateAdmissibility)"))
NO_FLAVOR = register(
    "KT445", "error", "no flavor of the queue takes the job's pods",
    rationale="Kueue gives a pod set only a flavor whose node labels its node selector and required node "
              "affinity allow, whose taints it tolerates, and whose topology-aware scheduling matches its "
              "placement; a job on a pool that is not one of its queue's flavors matches none and is never "
              "admitted (NoMatchingFlavor).",
    fix="queue the job on a ClusterQueue with a flavor for its pool (ResourceFlavor(pool=...)), or put it on one "
        "of the queue's pools",
    source=f"{FLAVOR_ASSIGNER} (checkFlavorForPodSets); https://github.com/kubernetes-sigs/kueue/blob/v0.19.2/pkg/scheduler/flavorassigner/tas_flavorassigner.go (checkPodSetAndFlavorMatchForTAS)")
UNCOVERED = register(
    "KT446", "error", "pods request a resource the queue does not cover",
    rationale="Kueue refuses a pod set that requests a resource none of its ClusterQueue's resource groups covers "
              "(resource ... unavailable in ClusterQueue); only a zero request is let through.",
    fix="cover the resource in the ClusterQueue's quotas (every resource its pods request: cpu, memory, "
        "accelerators, EFA, huge pages), or stop requesting it",
    source=f"{FLAVOR_ASSIGNER} (assignFlavors, findFlavorForPodSets)")
DOMAIN_TOO_SMALL = register(
    "KT447", "error", "required topology domain too small for the pods",
    rationale="Kueue's topology-aware scheduling admits a pod set with a required topology only into one domain "
              "of that level; when the pool's domains are known to be smaller than the pod set (one node for "
              "kubernetes.io/hostname, or the pool's declared topology_domain_nodes), it is never admitted.",
    fix="lower the job's nodes, require a broader level, or make the placement preferred",
    source=f"{KUEUE}/pkg/cache/scheduler/tas_flavor_snapshot.go (FindTopologyAssignmentsForFlavor)")
RESERVATION_TOO_SMALL = register(
    "KT448", "error", "job needs more nodes than the pool's capacity reservation holds",
    rationale="A pool of capacity type 'reserved' launches only into its capacity reservations (or capacity "
              "blocks); a gang larger than the instances they hold never gets its nodes.",
    fix="lower the job's nodes to the reservation's size, or reserve more and raise the pool's reserved_nodes",
    source="https://karpenter.sh/docs/concepts/nodeclasses/#speccapacityreservationselectorterms")
