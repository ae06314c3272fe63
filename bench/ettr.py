"""ETTR under failure: a 2-rank CPU run whose ranks are killed every ~2 minutes of training.

    python bench/ettr.py [--minutes 7] [--crash-every 120] [--loop trainer|ddp-minimal|nanogpt] [--starts warm,cold]

`--loop ddp-minimal` runs examples/ddp_minimal.py (a DDP tutorial's epoch/batch loop), `--loop nanogpt`
examples/nanogpt_style.py (nanoGPT's loop: a batch fetched a step ahead, gradient accumulation), loops of the user's
own on kubetrain_runtime.Run, with the same runtime config (KUBETRAIN_RUNTIME_CONFIG), under plain torchrun (its
default: the agent's store shared with the ranks). `--starts` runs the bench once per kind of start, each for
`--minutes`, and prints their recoveries apart and side by side at the end: warm, as a Function job on the runtime
starts (`python -m kubetrain_runtime SCRIPT`: a restarted rank is a fork of the warm process, kubetrain_runtime/warm.py),
and cold, as a command job's script starts (`python SCRIPT`: every restart imports torch; the trainer with
KUBETRAIN_WARM=0).

Starts `torchrun` (gloo, 2 ranks, a restart budget, failures noticed within 0.1 s) on a small GPT
with two-tier checkpoints (a node-local tier and an async durable tier) and `checkpoint.interval:
auto` (MTBF = the crash period), SIGKILLs one rank (the process torchrun started for it) every
`--crash-every` seconds, and stops the run after `--minutes`. Prints the intervals the trainer chose,
the recovery time of each crash (death -> first step of the restarted run) and where it went (from the
restarted rank 0's `resumed` record: torchrun noticing and starting the rank's process, the fork from
the warm process, the process group, the trainer, verifying and loading the checkpoint, the first
step), the tier each restart resumed from, and the job's ETTR as the trainer last reported it.
Targets: recovery <= 1 s, ETTR >= 0.985.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

CONFIG = {
    "model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
    "data": {"seq_len": 64},
    "batch": {"global_size": 16, "micro_size": 4},
    "optimizer": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 20},
    "max_steps": 1_000_000,
    "log_interval": 1,
}


# The example loops: the script and its flags (a step long enough that the runtime's share of it is realistic).
LOOPS = {"ddp-minimal": ["ddp_minimal.py", "--steps", "100000000", "--width", "512"],
         "nanogpt": ["nanogpt_style.py", "--max_iters=100000000", "--n_embd=128", "--block_size=64",
                     "--batch_size=8", "--eval_interval=1000", "--out_dir=out"]}
PROGRAM_MARK = b"training"  # in the command line of the processes torchrun starts (set by main)


def rank_pids(agent: int) -> list[int]:
    """The training processes torchrun started: the children of its agent."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == agent and PROGRAM_MARK in (stat.parent / "cmdline").read_bytes():
            children.append(int(stat.parent.name))
    return sorted(children)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7.0, help="of each kind of start")
    parser.add_argument("--crash-every", type=float, default=120.0, help="seconds of training between crashes")
    parser.add_argument("--loop", choices=["trainer", *LOOPS], default="trainer",
                        help="kubetrain's trainer, or an example loop on kubetrain_runtime.Run")
    parser.add_argument("--starts", default="warm,cold", help="the kinds of start to measure, in order: warm, cold")
    args = parser.parse_args()
    starts = args.starts.split(",")
    if not starts or set(starts) - {"warm", "cold"}:
        parser.error(f"--starts: warm, cold or both (comma-separated), not {args.starts!r}")
    recoveries = {}
    for start in starts:
        recoveries[start] = measure(args, cold=start == "cold")
        print()
    print("recovery, death -> first new step, by start: " + "; ".join(
        f"{start} max {max(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s" if times
        else f"{start}: none observed" for start, times in recoveries.items()) + "  (target <= 1 s warm)")
    return 0


def measure(args: argparse.Namespace, cold: bool) -> list[float]:
    """One run of `--minutes` with `cold` or warm starts: prints what it saw; the recovery of each crash."""
    global PROGRAM_MARK
    with tempfile.TemporaryDirectory() as tmp:
        runtime = {"checkpoint": {"dir": f"{tmp}/ckpt", "interval": "auto", "async_save": True, "keep": 2,
                                  "local_dir": f"{tmp}/node-local"},
                   "resilience": {"mtbf_s": args.crash_every}, "metrics": {"port": 0}}
        Path(tmp, "run.yaml").write_text(yaml.safe_dump({**CONFIG, **runtime}))
        Path(tmp, "runtime.yaml").write_text(yaml.safe_dump(runtime))
        crashes = int(args.minutes * 60 // args.crash_every) + 1
        if args.loop == "trainer":
            program = ["-m", "training", "--config", f"{tmp}/run.yaml"]
        else:
            script, *flags = LOOPS[args.loop]
            example = str(Path(__file__).resolve().parents[1] / "examples" / script)
            program = [*([] if cold else ["-m", "kubetrain_runtime"]), example, *flags]
            PROGRAM_MARK = b"kubetrain_runtime" if not cold else script.removesuffix(".py").encode()
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                   "--monitor-interval=0.1", f"--max-restarts={crashes}",
                   *program]
        env = {**os.environ, "KUBETRAIN_FAULT": "", "KUBETRAIN_RUNTIME_CONFIG": f"{tmp}/runtime.yaml",
               **({"KUBETRAIN_WARM": "0"} if cold else {})}
        agent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                 cwd=tmp)  # what a loop writes beside its checkpoints (nanoGPT: out/) goes with them
        events: list[tuple[float, dict]] = []

        def read() -> None:
            for line in agent.stdout:
                if line.startswith("{"):
                    events.append((time.monotonic(), json.loads(line)))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while not any(e["event"] == "step" for _, e in events):
            time.sleep(0.1)
        start = time.monotonic()
        kills = []
        while time.monotonic() - start < args.minutes * 60:
            time.sleep(1)
            if time.monotonic() - start >= args.crash_every * (len(kills) + 1):
                pids = rank_pids(agent.pid)
                if pids:
                    os.kill(pids[-1], signal.SIGKILL)
                    kills.append((time.monotonic(), time.time()))
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=60)
        reader.join(timeout=10)

    recoveries, anatomy = [], []
    for killed, killed_at in kills:
        resumed = next(((t, e) for t, e in events if t > killed and e["event"] == "resumed"), None)
        first_step = next((t for t, e in events if resumed and t > resumed[0] and e["event"] == "step"), None)
        if first_step:
            recoveries.append(first_step - killed)
            startup = resumed[1]["startup"]
            marks = [killed_at, *startup.values()]
            parts = [f"{name} +{later - earlier:.2f}" for name, earlier, later in zip(startup, marks, marks[1:])]
            anatomy.append(", ".join(parts) + f", first step +{first_step - resumed[0]:.2f}")
    steps = [e for _, e in events if e["event"] == "step"]
    chosen = [e for _, e in events if e["event"] == "checkpoint_interval"]
    print(f"loop: {args.loop}, {'cold' if cold else 'warm'} starts"
          f"; ran {args.minutes:g} min, {len(kills)} crashes (a rank SIGKILLed every {args.crash_every:g} s), "
          f"reached step {steps[-1]['step']}")
    for e in chosen[:1]:
        print(f"checkpoint intervals chosen: local every {e.get('local_steps', e['steps'])} steps "
              f"(save blocks {e.get('local_save_cost_s', 0):.3f} s), durable every {e['steps']} steps = "
              f"{e['interval_s']:.2f} s (save blocks {e['save_cost_s']:.3f} s); step {e['step_time_s']:.3f} s, "
              f"MTBF {e['mtbf_s']:g} s; Daly")
    tiers = [f"{e['tier']} step {e['step']}" for _, e in events if e["event"] == "resumed"]
    print("resumed from: " + (", ".join(tiers) or "nothing"))
    print("recovery, death -> first new step: " + ", ".join(f"{r:.2f} s" for r in recoveries)
          + f"  (max {max(recoveries):.2f} s)" if recoveries else "no recovery observed")
    for parts in anatomy:  # seconds from the death, step by step
        print(f"  {parts}")
    print(f"ETTR: {steps[-1]['ettr']:.4f}  (target >= 0.985); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    return recoveries


if __name__ == "__main__":
    sys.exit(main())
