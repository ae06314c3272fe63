"""The platform under the jobs: instance types, node pools, storage, queues, monitoring."""
