"""`kubetrain plan` on dist/ (the committed example fleet, and one edited by hand), its JSON, its exit codes, and
`kubetrain diff` showing a job whose verdict changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, kubetrain
from kubetrain import App, Cluster, ClusterQueue, Command, EfaNodePool, LocalQueue, ResourceFlavor, TrainingJob
from kubetrain.pipeline import synth

pytestmark = pytest.mark.processes  # `kubetrain plan` and `kubetrain diff` run as commands

P5 = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-00000001"],
      "security_group_ids": ["sg-00000001"], "role": "NodeRole"}


def test_plan_json_has_a_row_per_job_and_the_pools():
    result = kubetrain("plan", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    rows = {(j["cluster"], j["namespace"], j["job"]): j for j in plan["jobs"]}
    ablation = rows[("prod", "ml-prod", "gpt-1b-lr-ablation")]
    assert (ablation["verdict"], ablation["pool"], ablation["queue"], ablation["cluster_queue"]) == (
        "borrows", "p5", "research", "research")
    assert (ablation["pods"], ablation["accelerators"], ablation["nodes_needed"], ablation["pool_nodes"]) == (
        4, 32, 4, 16)
    assert (ablation["flavor"], ablation["quota"], ablation["potential"]) == ("p5", "16 nvidia.com/gpu",
                                                                             "128 nvidia.com/gpu")
    [reason] = ablation["reasons"]
    assert (reason["code"], reason["severity"], reason["field"]) == ("KT442", "warning", "queue")
    assert rows[("prod", "ml-prod", "gpt-1b-fsdp")]["verdict"] == "fits"
    assert rows[("dev", "ml-dev", "tiny-gpt")]["verdict"] == "fits"
    [p5] = [p for p in plan["pools"] if p["pool"] == "p5"]
    assert (p5["capacity_nodes"], p5["limited_by"], p5["demand_nodes"]) == (16, "static_nodes", 9)
    assert p5["at_once"] == ["ml-prod/gpt-1b-fsdp", "ml-prod/gpt-1b-lr-ablation", "ml-prod/llama-3-2-1b-sft",
                             "ml-prod/megatron-gpt"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


def _fleet() -> App:
    app = App()
    c = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"])
    pool = EfaNodePool(c, "p5", **P5, max_nodes=8)
    queue = LocalQueue(c, "q", cluster_queue=ClusterQueue(c, "q", flavors=[ResourceFlavor(c, "p5", pool=pool)]))
    for name, nodes in (("small", 2), ("large", 6)):
        TrainingJob(c, name, image="img:1", nodes=nodes, procs_per_node=8, pool=pool, queue=queue,
                    resources={"cpu": "184", "memory": "1800Gi"}, workload=Command(command=["train.py"]))
    return app


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a synthesized fleet committed; the test edits its dist/ as a hand (or a tool) would."""
    _git(tmp_path, "init", "-q", "-b", "main")
    synth(_fleet(), tmp_path / "dist")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "fleet")
    return tmp_path


def test_a_hand_edit_that_starves_a_job_shows_in_plan_and_diff(repo: Path):
    queue = repo / "dist" / "prod" / "_cluster" / "ClusterQueue.q.yaml"
    queue.write_text(queue.read_text().replace("nominalQuota: '64'", "nominalQuota: '32'"))
    pool = repo / "dist" / "prod" / "_cluster" / "NodePool.p5.yaml"
    pool.write_text(pool.read_text().replace("kubetrain.dev/max-nodes: '8'", "kubetrain.dev/max-nodes: '4'"))
    result = kubetrain("plan", cwd=repo)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    [large] = [i for i, line in enumerate(lines) if line.startswith("prod/ml/large ")]
    assert lines[large].split()[-1] == "never"
    assert lines[large + 1].startswith("    error KT440 nodes: its pods (1 per node) need 6 nodes of pool p5 at once; "
                                       "the pool can have at most 4 (max_nodes)")
    assert lines[large + 2].startswith("    error KT441 nodes: ClusterQueue q (behind LocalQueue q) can never admit "
                                       "its 6 pods: they request 48 nvidia.com/gpu in flavor p5, which can give it at "
                                       "most 32 (nominal quota 32, no cohort)")
    assert "  prod/p5: 4 nodes (max_nodes); declared jobs need 8 together (large 6, small 2): not all at once; " \
           "small fit together, large wait" in lines
    diff = kubetrain("diff", cwd=repo)
    assert diff.returncode == 0, diff.stderr
    assert "admission:\n  prod/ml/large: fits -> never: KT440 its pods (1 per node) need 6 nodes" in diff.stdout
    markdown = kubetrain("diff", "--format", "markdown", cwd=repo).stdout
    assert "#### Admission (`kubetrain plan`)\n\n- `prod/ml/large: fits -> never: KT440" in markdown


def test_plan_bad_input_is_one_line(tmp_path: Path, repo: Path):
    missing = kubetrain("plan", "--dist", str(tmp_path / "nope"), cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr.startswith("error: ") and "is not a folder" in missing.stderr
    (repo / "dist" / "prod" / "_cluster" / "ClusterQueue.q.yaml").write_text("spec: [\n")
    broken = kubetrain("plan", cwd=repo)
    assert broken.returncode == 2 and broken.stderr.startswith("error: dist/prod/_cluster/ClusterQueue.q.yaml:2: not "
                                                               "valid YAML") and "fix: " in broken.stderr
    pool = repo / "dist" / "prod" / "_cluster" / "NodePool.p5.yaml"
    pool.write_text(pool.read_text().replace("kubetrain.dev/max-nodes: '8'", "kubetrain.dev/max-nodes: eight"))
    (repo / "dist" / "prod" / "_cluster" / "ClusterQueue.q.yaml").unlink()
    odd = kubetrain("plan", cwd=repo)
    assert odd.returncode == 2 and "NodePool p5 is malformed: annotation kubetrain.dev/max-nodes is 'eight', not a whole number; " \
        "fix: dist/ is written by `kubetrain synth` from the fleet's code" in odd.stderr
    assert "Traceback" not in odd.stderr
