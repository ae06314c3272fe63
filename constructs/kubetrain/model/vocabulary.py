"""The names many layers share, each defined once: resource names, labels and annotations.

A name here is read or written by more than one module (a construct writes it, admission or cost reads it back
from dist/); a name only one module uses stays in that module. Sources: the device plugins (NVIDIA
k8s-device-plugin, AWS Neuron, AWS EFA), Kubernetes 1.33 (well-known labels, pod defaults), Karpenter v1 and Kueue
v0.19.2.
"""

from __future__ import annotations

# Extended resources the device plugins advertise on a node.
GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
ACCELERATOR_RESOURCES = (GPU_RESOURCE, NEURON_RESOURCE)
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGE_PAGES_RESOURCE = "hugepages-2Mi"  # what the EFA driver's pinned buffers use
EXTENDED_RESOURCES = (*ACCELERATOR_RESOURCES, EFA_RESOURCE)  # every extended resource a kubetrain pool offers

# Labels.
JOB_LABEL = "kubetrain.dev/job"  # every object of a training run, and its pods: the job's own name
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"  # well-known, set by the kubelet
NODEPOOL_LABEL = "karpenter.sh/nodepool"  # Karpenter labels every node with its pool
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # the LocalQueue that admits a job

# Annotations.
KUBERNETES_VERSION_ANNOTATION = "kubetrain.dev/kubernetes-version"  # on each namespace: its cluster's version

# Files.
RUN_CONFIG_FILE = "run.yaml"  # the trainer's run config, a key of its job's ConfigMap
RUN_CONFIG_ENV = "KUBETRAIN_RUN_CONFIG"  # in a trainer job's pods: where the run config is mounted

# Pod defaults.
DEFAULT_TERMINATION_GRACE_S = 30  # a pod's terminationGracePeriodSeconds unless its spec sets one
