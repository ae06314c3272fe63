"""ServiceAccount: the identity a job's pods run as, with an AWS IAM role through IRSA or EKS Pod Identity.

    irsa = ServiceAccount(cluster, "trainer", namespace="ml", iam_role_arn="arn:aws:iam::111122223333:role/ckpt")
    pid = ServiceAccount(cluster, "loader", namespace="ml", pod_identity_role_arn="arn:aws:iam::111122223333:role/d")
    TrainingJob(cluster, "gpt", ..., pod=PodSettings(service_account=irsa))

IRSA: the account carries `eks.amazonaws.com/role-arn`; the EKS Pod Identity Webhook (amazon-eks-pod-identity-webhook,
pkg/handler/handler.go) mutates every pod of such an account when it is created: it adds a projected volume
`aws-iam-token` (a service-account token for the audience sts.amazonaws.com) mounted at
/var/run/secrets/eks.amazonaws.com/serviceaccount, and sets AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE (plus
AWS_REGION, AWS_DEFAULT_REGION and AWS_STS_REGIONAL_ENDPOINTS where unset) in every container, init containers
included. That projected token is the pod's own volume: `automountServiceAccountToken: false` (kubetrain's default)
only removes the Kubernetes API token and leaves IRSA working, so the pods stay without API credentials.
EKS Pod Identity: an association (an EKS API object, not a Kubernetes one) maps the namespace and account to the
role, and EKS's admission webhook adds the `eks-pod-identity-token` volume (audience pods.eks.amazonaws.com) and
AWS_CONTAINER_CREDENTIALS_FULL_URI / AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, served by the Pod Identity Agent
add-on; the API token is not needed either. kubetrain emits the ServiceAccount and records the role on it
(`kubetrain.dev/eks-pod-identity-role-arn`); the association is created with
`aws eks create-pod-identity-association --cluster-name C --namespace NS --service-account NAME --role-arn ARN`
(or Terraform's aws_eks_pod_identity_association), see the README.

What breaks either mechanism is refused at synth (KT155): AWS credential variables in the job's env (static keys
win over the role in every AWS SDK's credential chain; the webhook leaves containers that already set
AWS_ROLE_ARN or AWS_WEB_IDENTITY_TOKEN_FILE alone), and a job volume with the webhook's volume name or mount path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from kubetrain.cluster import Cluster
from kubetrain.model.names import Dns1123Label, Dns1123Subdomain, LabelKey, LabelValue
from kubetrain.model.strict import StrictProps
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain.rules.sources import IAM_ARNS, IRSA, IRSA_WEBHOOK, POD_IDENTITY, cite
from kubetrain_runtime.problems import Problem, Text, rule_violation

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
POD_IDENTITY_ANNOTATION = "kubetrain.dev/eks-pod-identity-role-arn"
# What the webhooks add to a pod (volume name -> mount path).
WEBHOOK_VOLUMES = {"aws-iam-token": "/var/run/secrets/eks.amazonaws.com/serviceaccount",
                   "eks-pod-identity-token": "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount"}
# Variables that decide which credentials an AWS SDK uses before (or instead of) the role's.
AWS_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                      "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                      "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                      "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")

ROLE_ARN_INVALID = register(
    "KT154", "error", "IAM role ARN malformed, or two ways to one role",
    rationale="The webhook passes the role ARN to STS only when a pod starts, so a malformed one fails in the "
              "training container's first AWS call, long after the sync; an account with both an IRSA role and a "
              "Pod Identity role gets two sets of credentials, and which one an SDK uses depends on its version.",
    fix="write the role's ARN as IAM shows it (arn:aws:iam::<12-digit account>:role/<path/><name>), and give the "
        "account one of iam_role_arn or pod_identity_role_arn",
    source=cite(IAM_ARNS, IRSA, POD_IDENTITY))
ROLE_SHADOWED = register(
    "KT155", "error", "the job's environment or volumes shadow its service account's AWS role",
    rationale="Static keys, a profile or a credentials file in the environment come before the web identity and "
              "container credentials in every AWS SDK's default chain, so the pods would not use the role; the IRSA "
              "webhook leaves a container that already sets AWS_ROLE_ARN or AWS_WEB_IDENTITY_TOKEN_FILE unmutated, "
              "and skips its token volume when the pod has one of that name.",
    fix="remove the AWS credential variables from env (the role's credentials come from the webhook), and rename "
        "the volume or mount path that takes the webhook's",
    source=cite(IRSA_WEBHOOK, IRSA, POD_IDENTITY))

_ROLE_ARN = re.compile(r"^arn:aws(-cn|-us-gov|-iso|-iso-b)?:iam::[0-9]{12}:role/(?P<path>([\x21-\x7e]+/)*)"
                       r"(?P<name>[\w+=,.@-]{1,64})$")


def _role_arn(value: str) -> str:
    match = _ROLE_ARN.match(value)
    if match is None or len(match.group("path")) + 1 > 512:
        hint = " (that is a role's name: give its ARN)" if re.fullmatch(r"[\w+=,.@-]{1,64}", value) else ""
        raise rule_violation(ROLE_ARN_INVALID.code, f"{value!r} is not an IAM role ARN{hint}",
                             "write arn:aws:iam::<12-digit account id>:role/<optional path/><role name>, as "
                             "`aws iam get-role --query Role.Arn` prints it")
    return value


RoleArn = Annotated[str, AfterValidator(_role_arn)]


class ServiceAccountProps(StrictProps):
    name: Dns1123Subdomain = Field(..., description="The account's name; defaults to the construct id.")
    namespace: Dns1123Label | None = Field(None, description="Default: the cluster's first namespace. Jobs of this "
                                                             "namespace only can run as it.")
    iam_role_arn: RoleArn | None = Field(None, description="IRSA: the IAM role its pods assume with their "
                                                           "projected web identity token (the cluster's OIDC "
                                                           "provider must be trusted by the role).")
    pod_identity_role_arn: RoleArn | None = Field(None, description="EKS Pod Identity: the role of the association "
                                                                    "you create for this account (README).")
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    annotations: dict[LabelKey, Text] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_role(self) -> ServiceAccountProps:
        if self.iam_role_arn and self.pod_identity_role_arn:
            raise rule_violation(ROLE_ARN_INVALID.code, "both iam_role_arn (IRSA) and pod_identity_role_arn are "
                                 "set: the pods would get two sets of credentials", "keep one of them",
                                 field="pod_identity_role_arn")
        return self


class ServiceAccount(PlatformConstruct):
    """A ServiceAccount in one of the cluster's namespaces, optionally bound to an AWS IAM role."""

    Props = ServiceAccountProps
    kind = "serviceaccount"

    def __init__(self, scope: Cluster, id: str, props: ServiceAccountProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.name: str = p.name
        self.namespace, problems = scope.check_namespace(p.namespace)
        annotations = dict(p.annotations)
        if p.iam_role_arn:
            annotations[IRSA_ANNOTATION] = p.iam_role_arn
        if p.pod_identity_role_arn:
            annotations[POD_IDENTITY_ANNOTATION] = p.pod_identity_role_arn
        metadata: dict[str, Any] = {"name": p.name, "namespace": self.namespace}
        if p.labels:
            metadata["labels"] = dict(p.labels)
        if annotations:
            metadata["annotations"] = annotations
        # Pods of this account get no Kubernetes API token unless a job asks for one (IRSA and Pod Identity bring
        # their own projected tokens).
        self._emit(problems, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata,
                               "automountServiceAccountToken": False}])

    @property
    def role_arn(self) -> str | None:
        return self.props.iam_role_arn or self.props.pod_identity_role_arn


def identity_problems(account: ServiceAccount, env: Mapping[str, str], init_env: list[Mapping[str, str]],
                      volumes: list[tuple[str, str]]) -> list[Problem]:
    """KT155 for a job running as `account`: AWS credential variables in the training container's env (`env`) or an
    init container's, and job volumes (name, mount path) that take the webhooks' own."""
    if account.role_arn is None:
        return []
    problems = []
    for field, variables in [("env", env), *((f"pod.init_containers.{i}.env", e) for i, e in enumerate(init_env))]:
        for name in variables:
            if name in AWS_CREDENTIAL_ENV:
                problems.append(Problem(ROLE_SHADOWED.code, f"{field}.{name}", f"{name} takes the place of service "
                                        f"account {account.name}'s role {account.role_arn}", ROLE_SHADOWED.fix))
    for i, (name, path) in enumerate(volumes):
        if name in WEBHOOK_VOLUMES or path in WEBHOOK_VOLUMES.values():
            problems.append(Problem(ROLE_SHADOWED.code, f"volumes.{i}", f"volume {name} at {path} takes the "
                                    "EKS webhook's token volume", ROLE_SHADOWED.fix))
    return problems
