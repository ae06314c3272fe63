"""bench/gpu.sh, the GPU bench, at toy sizes on the CPU: every stage's code runs here before a lease meets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from gpu import STAGES  # noqa: E402

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("gpu-bench")
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu.sh"), "--dry-run", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1500, env={**os.environ, "PYTHON": sys.executable})
    return done, out


def test_every_stage_runs_to_its_end(dry_run):
    done, out = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for stage in STAGES:
        assert (out / f"{stage}.status").read_text().startswith("done"), stage
        assert json.loads((out / f"{stage}.json").read_text()), f"{stage} wrote no row"


def test_the_table_comes_last_with_a_row_per_check(dry_run):
    done, out = dry_run
    table = (out / "table.md").read_text()
    assert done.stdout.rstrip().endswith(table.rstrip().splitlines()[-1])
    for stage in STAGES:
        assert f"| {stage} | (stage) | done in" in table


def test_resume_checks_compare_real_steps_and_agree(dry_run):
    """The CPU runs are deterministic: a run killed with SIGKILL and resumed (the trainer's, and the user loop's under
    torchrun) must match the uninterrupted one exactly, and the comparison must have had steps to compare."""
    _, out = dry_run
    rows = json.loads((out / "resume.json").read_text()) + json.loads((out / "user_loop.json").read_text())
    assert len(rows) == 3
    for row in rows:
        assert row["verdict"] == "met", row
        assert "all identical" in row["figure"]


def test_without_a_gpu_the_real_run_refuses_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--dry-run" in done.stderr
    assert not list(tmp_path.iterdir())
