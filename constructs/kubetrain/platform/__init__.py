"""The platform under the jobs: instance types, node pools, storage, queues, monitoring, security.

One module per concept: instances.py (the catalog), node_pools.py (Karpenter), efa.py (the NCCL/EFA
profile), storage.py (FSx, EFS, S3), kueue.py and volcano.py (one queue system per cluster, queues.py),
monitoring.py (DCGM exporter, PodMonitor), security.py (Pod Security). Import from the modules; the
names below are the public ones.
"""

PUBLIC = {
    "kubetrain.model.instances": ("InstanceType", "InstanceCatalog", "BUILTIN_INSTANCE_TYPES", "BUILTIN_CATALOG"),
    "kubetrain.platform.node_pools": ("NodePool", "EfaNodePool", "GpuNodePool", "CpuNodePool", "pool_placement_problems"),
    "kubetrain.model.efa": ("NcclProfile", "efa_environment", "environment_problems"),
    "kubetrain.platform.storage": ("Claim", "FsxLustre", "Efs", "S3Bucket", "checkpoint_volume_problems",
                                   "dataset_volume_problems"),
    "kubetrain.platform.kueue_queues": ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "queued_job_problems"),
    "kubetrain.platform.volcano_queues": ("VolcanoQueue",),
    "kubetrain.platform.queues": ("TopologyPlacement",),
    "kubetrain.platform.gpu_monitoring": ("DcgmExporter", "TrainingPodMonitor"),
    "kubetrain.platform.security": ("PodSecurity", "pod_security_problems", "pod_security_labels",
                                    "namespace_level"),
}
