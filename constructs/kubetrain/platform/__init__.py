"""The platform under the jobs, one module per concept: node_pools.py (Karpenter NodePools and EC2NodeClasses),
storage.py (FSx for Lustre, EFS, S3), kueue_queues.py and volcano_queues.py (one queue system per cluster,
queues.py), scheduling.py (PriorityClass), identity.py (ServiceAccount), gpu_monitoring.py (DCGM exporter,
PodMonitor), alerts.py (PrometheusRule), security.py (Pod Security). The instance catalog and the NCCL/EFA facts
are plain data (kubetrain.model.instances, kubetrain.model.efa).
"""
