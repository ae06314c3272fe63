"""The API server's own validation of what kubetrain emits, and of what operators make of it (Kubernetes 1.33).

The schemas say which fields an object may have; the API server checks more: names per kind, label and
annotation syntax and size, tolerations, affinity, resources, ports, volumes and mounts, environment, Job,
Service and storage rules. Every built-in object is checked as the API server checks it, and every object
a controller or an operator will create from it (a Job's pods, a PyTorchJob's pods and Services, the Jobs
of a TrainJob's JobSet, an MPIJob's launcher and workers) is checked as the Pod, Job or Service it becomes,
with that operator's names and labels: a problem there is reported at the committed field it comes from.
What the API server checks of a kind, and what an operator creates from one, is that kind's knowledge:
its descriptor (kubetrain.kinds: `Kind.check`, `Kind.created`, ...), in its module; check.py walks them.

Plain Python over the objects' dicts, written after Kubernetes 1.33 pkg/apis/core/validation,
pkg/apis/batch/validation, pkg/apis/apps/validation, pkg/apis/storage/validation and k8s.io/apimachinery
v0.33 pkg/api/validation and pkg/util/validation (see each module). This package imports no cdk8s.
"""
