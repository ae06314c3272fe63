"""The pull-request workflow: it runs on changes to the fleet, posts `kubetrain diff` (priced) as Markdown, and
fails on a stale dist/."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubetrain.gitops.diff import COMMENT_MARKER

WORKFLOWS = Path(__file__).parent.parent / ".github" / "workflows"


def _load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as true
    return workflow


def test_gitops_workflow_posts_the_diff_and_checks_dist() -> None:
    workflow = _load("gitops.yaml")
    assert workflow["on"]["pull_request"]["paths"] == ["apps/**", "constructs/**", "dist/**"]
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["diff"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0
    runs = "\n".join(step.get("run", "") for step in steps)
    assert 'kubetrain diff --base "origin/$BASE_REF" --format markdown > "$RUNNER_TEMP/kubetrain-diff.md"' in runs
    assert "kubetrain cost" in runs  # the whole fleet's cost in the log; the comment holds the change's
    post = next(step for step in steps if step.get("uses", "").startswith("actions/github-script"))
    assert f"const marker = '{COMMENT_MARKER}';" in post["with"]["script"]
    assert "createComment" in post["with"]["script"] and "updateComment" in post["with"]["script"]
    assert post["env"]["DIFF_FILE"].endswith("/kubetrain-diff.md")
    stale = steps[-1]["run"]
    assert "kubetrain synth --outdir" in stale and "exit 1" in stale


def test_ci_keeps_its_test_job() -> None:
    steps = _load("ci.yaml")["jobs"]["test"]["steps"]
    runs = [step for step in steps if "run" in step]
    assert runs[-1]["run"] == "bash .ci/run"
    # After it, only the manual's screenshots are kept (tests/test_docs_site.py), whatever the run's outcome.
    assert [step["uses"].split("@")[0] for step in steps[steps.index(runs[-1]) + 1:]] == ["actions/upload-artifact"]
