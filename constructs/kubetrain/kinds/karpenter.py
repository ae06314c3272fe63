"""Karpenter's kinds (karpenter-provider-aws v1.9): a NodePool and the EC2NodeClass it names, both cluster-scoped
(kubetrain.platform.node_pools builds them). The node class is a definition; the pool comes a wave later.
"""

from __future__ import annotations

from kubetrain.kinds.base import DEFINITIONS, PLATFORM, CrdSource, Kind, Manifest, Reference


def _node_pool_references(obj: Manifest) -> list[Reference]:
    ref = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
    return [Reference(ref.get("group", ""), ref.get("kind", ""), None, ref.get("name", ""))] if ref else []


NODEPOOL_API_VERSION = "karpenter.sh/v1"
EC2NODECLASS_API_VERSION = "karpenter.k8s.aws/v1"


KINDS = (
    Kind(NODEPOOL_API_VERSION, "NodePool", PLATFORM, references=_node_pool_references,
         crd=CrdSource("karpenter.sh_nodepools.yaml", "aws/karpenter-provider-aws", "v1.9", (NODEPOOL_API_VERSION,))),
    Kind(EC2NODECLASS_API_VERSION, "EC2NodeClass", DEFINITIONS,
         crd=CrdSource("karpenter.k8s.aws_ec2nodeclasses.yaml", "aws/karpenter-provider-aws", "v1.9",
                       (EC2NODECLASS_API_VERSION,))),
)
