"""Job rules on what the container starts with: the Triton cache and EFA's huge pages its environment points
at, and its image's tag."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.names import image_digest, image_tag
from kubetrain.model.quantity import parse_quantity
from kubetrain.rules.sources import EFA_ENV, EMPTYDIR, IMAGES, TRITON, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


@job_rule("KT117", "error", "Triton cache on shared storage",
          rationale="Hundreds of ranks compiling into one cache on a shared file system contend on its locks: the "
                    "guide's 512-rank hang.",
          fix="leave TRITON_CACHE_DIR to kubetrain (GPU jobs get an emptyDir on the node at /var/cache/triton) or "
              "point it at another emptyDir",
          source=cite(TRITON, EMPTYDIR))
def triton_cache_local(job: JobSpec) -> Iterator[Violation]:
    path = job.props.env.get("TRITON_CACHE_DIR")
    volume = job.volume_at(path) if path and path.startswith("/") else None
    if volume is not None and volume.shared:
        yield ("env.TRITON_CACHE_DIR", f"{path} is on shared volume {volume.name}")


@job_rule("KT118", "warning", "huge pages requested while EFA is told not to use them",
          rationale="FI_EFA_USE_HUGE_PAGE=0 makes the EFA provider ignore the huge pages the pod reserves: memory "
                    "set aside for nothing.",
          fix="drop FI_EFA_USE_HUGE_PAGE=0, or set resources.hugepages_2mi to 0Mi", source=EFA_ENV)
def hugepages_used(job: JobSpec) -> Iterator[Violation]:
    pages = job.resources.hugepages_2mi
    if job.props.env.get("FI_EFA_USE_HUGE_PAGE") == "0" and pages and parse_quantity(pages) > 0:
        yield ("env.FI_EFA_USE_HUGE_PAGE", f"{pages} of huge pages are reserved and FI_EFA_USE_HUGE_PAGE=0 "
               "leaves them unused")


@job_rule("KT119", "warning", "image without a fixed tag",
          rationale="An image with no tag or `latest` changes under the job: a restarted pod can run other code, and "
                    "no run can be reproduced.",
          fix="pin a version tag or an @sha256 digest", source=IMAGES)
def image_pinned(job: JobSpec) -> Iterator[Violation]:
    tag = image_tag(job.props.image)
    if image_digest(job.props.image) is None and tag in (None, "latest"):
        yield ("image", f"{job.props.image!r} has {'no tag' if tag is None else 'the tag latest'}")
