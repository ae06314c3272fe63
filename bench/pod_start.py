"""The CPU a pod of two trainer ranks costs under each torchrun: plain torchrun, whose first rank starts the warm
process (kubetrain_runtime/warm.py) as a fresh interpreter, against the pods' own (`python -m
kubetrain_runtime.torchrun`), which forks it from the agent with torch already imported.

    python bench/pod_start.py [--rounds 5]

Each round trains the trainer's tiny GPT for 8 steps on two ranks under each launcher, alternating which goes first.
This process is the child subreaper of everything they start (prctl PR_SET_CHILD_SUBREAPER): the warm process, which
outlives the rank that started it, is reaped here, so its CPU and its ranks' count with the agent's. Prints the median
CPU and wall time of each and the ratio of their CPU (target <= 0.85: a pod no longer imports torch twice). Linux only.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LAUNCHERS = {"plain torchrun": "torch.distributed.run", "pods' torchrun": "kubetrain_runtime.torchrun"}
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def tiny_run(folder: Path) -> Path:
    config = {"model": {"vocab_size": 256, "dim": 32, "n_layers": 2, "n_heads": 4},
              "data": {"source": "synthetic", "seq_len": 32}, "batch": {"global_size": 8, "micro_size": 2},
              "max_steps": 8, "seed": 7, "metrics": {"port": 0},
              "checkpoint": {"dir": str(folder / "ckpt"), "interval": 100, "keep": 1}}
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_orphans() -> None:
    """Wait for every process left behind (reparented here): the warm process ends with its agent."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def measure(module: str, config: Path) -> tuple[float, float]:
    """(CPU seconds of everything the run started, its wall seconds)."""
    shutil.rmtree(config.parent / "ckpt", ignore_errors=True)
    before, started = cpu_of_children(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", module, "--standalone", "--nproc-per-node=2", "-m", "training",
                           "--config", str(config)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - started
    reap_orphans()
    if done.returncode:
        raise SystemExit(f"{module} exited {done.returncode}: {done.stderr[-2000:]}")
    return cpu_of_children() - before, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("bench/pod_start.py needs Linux (prctl PR_SET_CHILD_SUBREAPER)")
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in LAUNCHERS}
    with tempfile.TemporaryDirectory() as folder:
        config = tiny_run(Path(folder))
        for round_ in range(args.rounds):
            for name in (list(LAUNCHERS) if round_ % 2 == 0 else list(reversed(LAUNCHERS))):
                found[name].append(measure(LAUNCHERS[name], config))
    cpu = {name: statistics.median(c for c, _ in rows) for name, rows in found.items()}
    wall = {name: statistics.median(w for _, w in rows) for name, rows in found.items()}
    for name in LAUNCHERS:
        print(f"{name}: CPU {cpu[name]:.2f} s, wall {wall[name]:.2f} s")
    ratio = cpu["pods' torchrun"] / cpu["plain torchrun"]
    print(f"CPU ratio {ratio:.2f} ({'met' if ratio <= 0.85 else 'NOT MET'}: target <= 0.85; {args.rounds} rounds, "
          "medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
