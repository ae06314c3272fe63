"""What the fleet says about its delivery: the Git repository Argo CD reads and where each cluster is."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from kubetrain.model.names import Dns1123Label, Dns1123Subdomain
from kubetrain.model.strict import StrictProps
from kubetrain_runtime.problems import INVALID_VALUE, rule_violation

# https://host/path, ssh://user@host/path or scp-like user@host:path: the forms Argo CD's repo server clones.
_REPO_URL = re.compile(r"^(https?://[^\s/]+/\S+|ssh://\S+@[^\s/]+/\S+|[\w.-]+@[\w.-]+:\S+)$")
# A page of GitHub's, GitLab's or Bitbucket's web view (a folder or a file at a revision), copied from a browser.
_BROWSER_LINK = re.compile(r"^(?P<repo>https?://[^\s/]+/[^\s]+?)/(?:-/)?(?:tree|blob|src)/(?P<rest>\S+)$")
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$")


class Destination(StrictProps):
    """Where one cluster's Application syncs to: the API server URL or the name of a cluster registered in
    Argo CD (exactly one), and the namespace for objects that name none."""

    server: str | None = Field(None, pattern=r"^https://[^\s/:]+(:[0-9]{1,5})?(/\S*)?$",
                               description="API server URL, e.g. https://kubernetes.default.svc (API servers "
                                           "serve HTTPS only).")
    name: str | None = Field(None, pattern=r"^\S(.*\S)?$",
                             description="Name of a cluster registered in Argo CD (its cluster secret).")
    namespace: Dns1123Label | None = Field(
        None, description="Default namespace of the Application. Default: the cluster's first namespace.")

    @model_validator(mode="after")
    def _one_of(self) -> Destination:
        if (self.server is None) == (self.name is None):
            raise rule_violation(INVALID_VALUE, "a destination needs exactly one of server and name",
                                 "give the API server URL (server=...) or the Argo CD cluster name (name=...)")
        return self


class Retry(StrictProps):
    """How Argo CD retries a failed sync: an operator's webhook not yet up, a CRD not yet installed."""

    limit: int = Field(5, ge=1, description="Attempts after the first.")
    duration: str = Field("10s", description="First backoff.")
    factor: int = Field(2, ge=1, description="Each backoff is the previous one times this.")
    max_duration: str = Field("3m", description="Longest backoff.")

    @field_validator("duration", "max_duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise rule_violation(INVALID_VALUE, f"{value!r} is not a duration", "write it as Go does: 10s, 3m, 1h30m")
        if not go_duration_seconds(value) > 0:
            raise rule_violation(INVALID_VALUE, f"{value!r} is no backoff at all", "give a positive duration, e.g. 10s")
        return value

    @model_validator(mode="after")
    def _longest_after_first(self) -> Retry:
        if go_duration_seconds(self.max_duration) < go_duration_seconds(self.duration):
            raise rule_violation(INVALID_VALUE, f"max_duration {self.max_duration} is shorter than the first backoff "
                                 f"{self.duration}", "make max_duration at least duration", field="max_duration")
        return self


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def go_duration_seconds(text: str) -> float:
    """Seconds of a Go duration that matches _DURATION (10s, 1h30m, 1.5s)."""
    return sum(float(number) * _UNITS[unit] for number, _, unit in re.findall(r"([0-9]+(\.[0-9]+)?)(ms|s|m|h)", text))


# git check-ref-format's rules: what no branch or tag name can hold.
_BAD_REF = re.compile(r"(^[/.-])|([/.]$)|\.\.|//|@\{|\.lock(/|$)|/\.|[\x00-\x20\x7f~^:?*\[\\]")


class ArgoCdProps(StrictProps):
    """Argo CD delivery of the whole fleet: one AppProject and one Application per cluster."""

    repo_url: str = Field(..., description="The Git repository that holds dist/, as Argo CD clones it.")
    revision: str = Field("main", min_length=1, description="Branch, tag or commit Argo CD syncs.")
    path_prefix: str = Field("dist", description="Where synth's output lies in the repository.")
    destinations: dict[Dns1123Label, Destination] = Field(
        ..., description="Every cluster of the fleet, by name, and where Argo CD reaches it.")
    project: Dns1123Subdomain = Field("kubetrain", description="The AppProject's name; Applications are "
                                                               "named <project>-<cluster>.")
    argocd_namespace: Dns1123Label = Field("argocd", description="The namespace Argo CD runs in.")
    folder: Dns1123Label = Field("argocd", description="The folder under dist/ for the Argo CD objects; "
                                                       "no cluster may have this name.")
    retry: Retry = Field(default_factory=Retry)
    cascade_delete: bool = Field(False, description="Deleting an Application deletes its objects (Argo CD's "
                                                    "resources finalizer). Off: removing a cluster from the fleet "
                                                    "must not kill its running jobs by accident.")

    @field_validator("repo_url")
    @classmethod
    def _repo(cls, value: str) -> str:
        if not _REPO_URL.match(value):
            raise rule_violation(INVALID_VALUE, f"{value!r} is not a Git URL Argo CD can clone",
                                 "use https://host/org/repo.git or git@host:org/repo.git")
        link = _BROWSER_LINK.match(value)
        if link:  # Argo CD would try to clone the web page's URL and fail to sync
            raise rule_violation(INVALID_VALUE, f"{value!r} is a link to a page of the repository's web view, not a "
                                 "URL Argo CD can clone", f"use the clone URL {link['repo']}.git; the revision and "
                                 "the folder are revision and path_prefix")
        return value

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str) -> str:
        if value != "HEAD" and _BAD_REF.search(value):
            raise rule_violation(INVALID_VALUE, f"{value!r} is not a branch, tag or commit name git accepts",
                                 "give a branch (main), a tag (v1.2.0) or a commit SHA, without spaces or ~^:?*[\\")
        return value

    @field_validator("path_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        parts = value.strip("/").split("/")
        if not value.strip("/") or any(p in ("", ".", "..") for p in parts):
            raise rule_violation(INVALID_VALUE, f"{value!r} is not a folder inside the repository",
                                 "give the path of dist/ relative to the repository root, e.g. dist")
        return "/".join(parts)
