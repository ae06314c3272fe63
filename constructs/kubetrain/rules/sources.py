"""Where the rules come from: pages and source files a user can open, with their versions.

Every rule names its source (`kubetrain explain CODE` prints it): upstream documentation or code, or a
file of this repository. A test checks that each citation is a URL or a path that exists here.
"""

from __future__ import annotations

# The manual, published from docs/ (the one place its address is written: the site's build takes its site_url from
# here, scripts/docs_site/hooks.py, and the alerts' runbook links are its pages).
MANUAL = "https://kubetrain.github.io/kubetrain/"
K8S_NAMES = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
PRUNING = "https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning"
PYTORCHJOB = "https://github.com/kubeflow/trainer/tree/v1.9.4/pkg/controller.v1/pytorch"
PYTORCHJOB_TYPES = "https://github.com/kubeflow/trainer/blob/v1.9.4/pkg/apis/kubeflow.org/v1/pytorch_types.go"
TRAINER = "https://github.com/kubeflow/trainer/tree/v2.3.0/pkg/runtime/framework/plugins/torch"
TRAINER_STATUS = "https://github.com/kubeflow/trainer/tree/v2.3.0/pkg/runtime/framework/plugins/trainjobstatus"
EC2 = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
EFA_TYPES = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html"
EKS_EFA = "https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html"
EFA_ENV = "https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md"
TUNER = "https://github.com/aws/aws-ofi-nccl/blob/master/doc/tuner.md"
NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
TORCHRUN = "https://docs.pytorch.org/docs/stable/elastic/run.html"
PG = "https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.init_process_group"
DCP = "https://docs.pytorch.org/docs/stable/distributed.checkpoint.html"
EMPTYDIR = "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"
VOLUMES = "https://kubernetes.io/docs/concepts/storage/volumes/"
MEGATRON = "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/arguments.py"
KARPENTER_TYPES = "https://github.com/aws/karpenter-provider-aws/blob/v1.9.0/pkg/providers/instancetype/types.go"
TAINTS = "https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"
KARPENTER_NODECLASS = "https://karpenter.sh/docs/concepts/nodeclasses/"
FSX_CAPACITY = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html"
FSX_CSI = "https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/docs/parameters.md"
FSX_PERF = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html"
MOUNTPOINT = "https://github.com/awslabs/mountpoint-s3/blob/main/doc/SEMANTICS.md"
KUEUE_TAS = "https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/"
KUEUE_JOBS = "https://kueue.sigs.k8s.io/docs/tasks/run/jobs/"
PSS = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
K8S_PROBES = "https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/"
K8S_INIT_CONTAINERS = "https://kubernetes.io/docs/concepts/workloads/pods/init-containers/"
PRIORITY = "https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/"
IRSA = "https://docs.aws.amazon.com/eks/latest/userguide/iam-roles-for-service-accounts.html"
IRSA_WEBHOOK = "https://github.com/aws/amazon-eks-pod-identity-webhook/blob/master/pkg/handler/handler.go"
POD_IDENTITY = "https://docs.aws.amazon.com/eks/latest/userguide/pod-identities.html"
IAM_ARNS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns"
CPU_LIMITS = "https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/"
ARGO_APP = "https://argo-cd.readthedocs.io/en/stable/user-guide/application-specification/"
ARGO_WAVES = "https://argo-cd.readthedocs.io/en/stable/user-guide/sync-waves/"
ARGO_PROJECTS = "https://argo-cd.readthedocs.io/en/stable/user-guide/projects/"
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests"
KV = "https://github.com/willthames/kubernetes-validate"
IMAGES = "https://kubernetes.io/docs/concepts/configuration/overview/#container-images"
CUDA_ENV = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"
DCGM = "https://github.com/NVIDIA/dcgm-exporter"
KUEUE_KEP = "https://github.com/kubernetes-sigs/kueue/tree/main/keps/2724-topology-aware-scheduling"
KARPENTER_GPU = "https://karpenter.sh/docs/concepts/scheduling/#acceleratorsgpu-resources"
VOLCANO = "https://volcano.sh/en/docs/queue/"
TRITON = "https://github.com/triton-lang/triton/blob/main/python/triton/runtime/cache.py"
HF_AUTO = "https://huggingface.co/docs/transformers/model_doc/auto"
HF_REMOTE_CODE = "https://huggingface.co/docs/transformers/custom_models"
HF_CONFIG = "https://huggingface.co/docs/transformers/main_classes/configuration"
HF_OFFLINE = "https://huggingface.co/docs/transformers/installation#offline-mode"
HF_DOWNLOAD = "https://huggingface.co/docs/huggingface_hub/guides/cli#download-an-entire-repository"
TORCH_EMBEDDING = "https://docs.pytorch.org/docs/stable/generated/torch.nn.Embedding.html"

# The API server's own validation (Kubernetes 1.33) and what the controllers and operators create.
_K8S = "https://github.com/kubernetes/kubernetes/blob/v1.33.0/pkg/apis"
K8S_CORE_VALIDATION = f"{_K8S}/core/validation/validation.go"
K8S_BATCH_VALIDATION = f"{_K8S}/batch/validation/validation.go"
K8S_APPS_VALIDATION = f"{_K8S}/apps/validation/validation.go"
K8S_STORAGE_VALIDATION = f"{_K8S}/storage/validation/validation.go"
K8S_SCHEDULING_VALIDATION = f"{_K8S}/scheduling/validation/validation.go"
K8S_JOB_LABELS = "https://github.com/kubernetes/api/blob/v0.33.0/batch/v1/types.go"
OBJECT_META = "https://github.com/kubernetes/apimachinery/blob/v0.33.0/pkg/api/validation/objectmeta.go"
LABELS_AND_SELECTORS = ("https://github.com/kubernetes/apimachinery/blob/v0.33.0/pkg/apis/meta/v1/validation/"
                        "validation.go")
NAME_FORMATS = "https://github.com/kubernetes/apimachinery/blob/v0.33.0/pkg/util/validation/validation.go"
PYTORCHJOB_WEBHOOK = "https://github.com/kubeflow/trainer/blob/v1.9.4/pkg/webhooks/pytorch/pytorchjob_webhook.go"
JOBSET_WEBHOOK = "https://github.com/kubernetes-sigs/jobset/blob/v0.12.0/pkg/webhooks/jobset_webhook.go"
MPI_OPERATOR = "https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go"

CRDS = "https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/"
CEL = "https://kubernetes.io/docs/reference/using-api/cel/"


def cite(*sources: str) -> str:
    """Several sources as one `source` text."""
    return "; ".join(sources)
