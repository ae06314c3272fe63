"""Shared fixtures: the project root, the upstream CRDs, and a way to run our commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CRDS = ROOT.parent / "shared" / "crds"


@pytest.fixture(scope="session")
def crds() -> Path:
    if not CRDS.is_dir():
        pytest.skip(f"upstream CRDs not found at {CRDS}: custom resources cannot be validated without them")
    return CRDS


def run(args: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command with this interpreter's environment; the project's sources importable."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "constructs"), str(ROOT)])}
    full_env.pop("CDK8S_OUTDIR", None)
    full_env.update(env or {})
    return subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def kubetrain(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "kubetrain", *args], cwd=cwd, env=env)


def read_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def dist_file(cluster: str, kind: str, job: str) -> Path:
    """A job's committed object: `<Kind>.<job>.yaml`, or `<Kind>.<job>-<hash>.yaml` for create-once runs."""
    (path,) = [p for p in (ROOT / "dist" / cluster).glob(f"*/{kind}.{job}*.yaml")
               if re.fullmatch(rf"{re.escape(kind)}\.{re.escape(job)}(-[0-9a-f]{{8}})?\.yaml", p.name)]
    return path
