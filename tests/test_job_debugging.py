"""What a job sets to debug itself: NCCL's log as typed settings, Nsight Systems per rank under torchrun."""

from __future__ import annotations

import os
import subprocess

import pytest
from kubetrain import App, Cluster, IndexedJob, TrainingJob
from kubetrain.pipeline import check_objects, fleet_errors, render_objects

CKPT = {"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}
JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge", "target": IndexedJob(),
       "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32}, "volumes": [CKPT],
       "workload": {"kind": "command", "command": ["train.py", "--lr", "3e-4"]}}


def container(**overrides) -> dict:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", {**JOB, **overrides})
    assert fleet_errors(app) == []
    objects = render_objects(app)
    check_objects(objects)
    (job,) = [obj for obj in objects.values() if obj["kind"] == "Job"]
    return job["spec"]["template"]["spec"]["containers"][0]


def env_of(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def test_nccl_debug_settings_become_ncclss_variables_with_a_log_file_per_rank_on_the_volume():
    env = env_of(container(nccl={"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2", "debug": {
        "level": "INFO", "subsystems": ["INIT", "NET"], "log_dir": "/ckpt/nccl-logs/"}}))
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert env["NCCL_DEBUG_FILE"] == "/ckpt/nccl-logs/nccl.%h.%p.log"
    excluded = env_of(container(nccl={"aws_ofi_nccl": "1.14.0", "nccl": "2.26.2", "debug": {
        "subsystems": ["COLL"], "exclude_subsystems": True}}))
    assert excluded["NCCL_DEBUG_SUBSYS"] == "^COLL" and "NCCL_DEBUG_FILE" not in excluded


def workload(**profile) -> dict:
    return {"kind": "command", "command": ["train.py", "--lr", "3e-4"],
            "profile": {"output_dir": "/ckpt/profiles", **profile}}


def test_nsys_runs_as_each_ranks_program_not_as_pythons_script():
    command = container(workload=workload(trace=["cuda", "nvtx"], delay_s=30, duration_s=60))["command"]
    tail = command[command.index("--no-python"):]
    assert tail == ["--no-python", "nsys", "profile", "--trace=cuda,nvtx", "--force-overwrite=true",
                    "--output=/ckpt/profiles/job.rank%q{RANK}.%h.%p", "--delay=30", "--duration=60",
                    "python", "-u", "train.py", "--lr", "3e-4"]


@pytest.mark.processes
def test_profiling_some_ranks_runs_nsys_on_those_and_the_plain_program_on_the_others(tmp_path):
    """The wrapper torchrun starts per rank, run by a real shell with a stand-in nsys on PATH."""
    command = container(workload=workload(ranks=[0, 3]))["command"]
    shell, flag, script, name = command[command.index("--no-python") + 1:][:4]
    assert (shell, flag, name) == ("/bin/sh", "-c", "kubetrain-nsys")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program, says in (("nsys", "profiled"), ("python", "plain")):
        (bin_dir / program).write_text(f'#!/bin/sh\necho {says} "$@"\n')
        (bin_dir / program).chmod(0o755)
    ran = {}
    for rank in range(5):
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "RANK": str(rank)}
        result = subprocess.run([shell, flag, script, name, "python", "-u", "train.py"], env=env,
                                capture_output=True, text=True, check=True)
        ran[rank] = result.stdout.split()[0]
    assert ran == {0: "profiled", 1: "plain", 2: "plain", 3: "profiled", 4: "plain"}


def test_a_profile_that_cannot_be_read_later_is_refused():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "lost", {**JOB, "workload": {**workload(ranks=[16]), "profile": {
        "output_dir": "/tmp/profiles", "ranks": [16]}}})
    TrainingJob(cluster, "nsys-in-command", {**JOB, "workload": {"kind": "command", "command": [
        "nsys", "profile", "-o", "/ckpt/p", "train.py"]}})
    found = sorted((f.where.rsplit("/", 1)[-1], f.problem.code, f.problem.path) for f in fleet_errors(app))
    assert found == [("lost", "KT173", "workload.profile.output_dir"), ("lost", "KT173", "workload.profile.ranks.0"),
                     ("nsys-in-command", "KT140", "workload.command.0")]
    assert "NsysProfile" in fleet_errors(app)[-1].problem.fix
