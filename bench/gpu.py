"""Every GPU check of the project in one command, sized for a short lease of one H100 or H200.

    bash bench/gpu.sh [--out DIR] [--stage NAME ...]     on the GPU machine (under 6 minutes)
    python bench/gpu.py --dry-run [--out DIR]            every stage at toy sizes on the CPU (tests/test_gpu_bench.py)

Each stage runs in a process of its own under its own timeout and writes its rows to DIR/<stage>.json as each row
ends, so a stage that is killed (or a lease that ends) still leaves what it finished. The driver prints one table
last and writes it to DIR/table.md. The stages:

- `gpt`: tokens/s and MFU of the trainer on a ~1B GPT (bf16, FSDP2, per-block torch.compile) beside a bare loop of
  the same model as a user writes it (fused AdamW, bf16 autocast, per-block compile, no runtime); target: the
  trainer/bare ratio >= 0.99 and MFU >= 0.45 (LLM Foundry publishes 41.8 % for 1B on an H100).
- `hf`: the same for a ~1B transformers `LlamaForCausalLM` (built from a config, no download) through the trainer's
  `hf` path against a bare transformers loop.
- `memory`: training/memory.py's estimate (CUDA context, NCCL and allocator included) against
  `torch.cuda.max_memory_allocated` (the tensors), `max_memory_reserved` and the device's used memory (the total),
  DDP and FSDP2, with and without activation checkpointing, with and without gradient accumulation: each ratio
  (target within 1 +/- 0.15) and whether the fit rule's verdict at the device's memory would have been right.
- `resume`: two uninterrupted runs of `python -m training` under the pods' torchrun (are GPU runs bit-identical at
  all?), then one whose rank is killed with SIGKILL and restarted by torchrun, as a pod's is: the losses after the
  resume against the uninterrupted run's, step by step, exactly.
- `checkpoint`: the time an async save blocks training against a synchronous save, from device memory.
- `user_loop`: examples/ddp_minimal.py on `kubetrain_runtime.Run` under the pods' torchrun on NCCL, killed with
  SIGKILL and restarted by torchrun, against an uninterrupted run: the final losses, exactly.

Only torch, transformers and this repository's `training/` and `kubetrain_runtime/` are imported (never the
compiler); bench/gpu.sh installs the few packages a bare PyTorch image lacks from wheels carried beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES: dict[str, int] = {  # name: seconds it may take on an H100 (the driver's timeout); about 5.5 minutes in all
    "gpt": 90, "hf": 80, "memory": 60, "resume": 45, "checkpoint": 25, "user_loop": 35}
DRY_RUN_TIMEOUT_S = 600  # a stage at toy sizes on a busy 2-core CPU (about a minute on a quiet one)
MEMORY_BAND = 0.15


# -- rows -------------------------------------------------------------------------------------------------------

class Rows:
    """A stage's results, rewritten to DIR/<stage>.json after each row: a killed stage keeps its finished rows."""

    def __init__(self, out: Path, stage: str):
        self.path = out / f"{stage}.json"
        self.rows: list[dict] = []

    def add(self, check: str, figure: str, target: str = "", ok: bool | None = None) -> None:
        self.rows.append({"check": check, "figure": figure, "target": target,
                          "verdict": "" if ok is None else ("met" if ok else "NOT MET")})
        self.path.write_text(json.dumps(self.rows, indent=1))
        verdict = self.rows[-1]["verdict"]
        print(f"  {check}: {figure}" + (f"  [{verdict}: target {target}]" if verdict else ""), flush=True)


# -- what the stages share ----------------------------------------------------------------------------------------

def device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def world_of_one() -> Iterator:
    import torch.distributed as dist

    from kubetrain_runtime.distributed import init_world

    world = init_world()
    try:
        yield world
    finally:
        dist.destroy_process_group()


def run_config(model: dict, *, seq_len: int, micro: int, accum: int = 1, strategy: str = "fsdp",
               checkpointing: bool = False, compile_: bool, folder: str, precision: str = "bf16", steps: int = 10**6):
    from training.config import RunConfig

    return RunConfig.model_validate({
        "model": model, "data": {"seq_len": seq_len},
        "batch": {"global_size": micro * accum, "micro_size": micro},
        "strategy": {"name": strategy, "compile": compile_, "activation_checkpointing": checkpointing},
        "precision": precision, "max_steps": steps, "log_interval": 1,
        "checkpoint": {"dir": folder, "interval": 10**6}, "metrics": {"port": 0}})


def train_records(run, world, steps: int) -> tuple[list[dict], object]:
    """The trainer's JSON records of `steps` steps, and the trainer (closed)."""
    from training.trainer import Trainer

    trainer = Trainer(run, world)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        trainer.train(stop_after_step=steps)
    trainer.close()
    return [json.loads(line) for line in output.getvalue().splitlines() if line.startswith("{")], trainer


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def bare_tokens_per_s(model, vocab: int, seq_len: int, micro: int, steps: int, warmup: int,
                      logits: Callable) -> float:
    """A user's loop: per-block compile done by the caller, fused AdamW on CUDA, bf16 autocast, no runtime."""
    import torch
    import torch.nn.functional as F

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=cuda)
    generator = torch.Generator(device=device).manual_seed(0)
    times = []
    for step in range(steps):
        tokens = torch.randint(vocab, (micro, seq_len + 1), device=device, generator=generator)
        started = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16):
            out = logits(model(tokens[:, :-1]))
        loss = F.cross_entropy(out.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - started)
    return micro * seq_len / statistics.median(times)


def throughput_rows(rows: Rows, name: str, records: list[dict], bare_tps: float, warmup: int, mfu_target: float,
                    dry: bool) -> None:
    steps = [r for r in records if r["event"] == "step"][warmup:]
    tps = statistics.median(r["tokens_per_s"] for r in steps)
    ratio = tps / bare_tps
    rows.add(f"{name}: trainer/bare tokens/s", f"{ratio:.3f} ({tps:,.0f} / {bare_tps:,.0f})", ">= 0.99",
             None if dry else ratio >= 0.99)
    mfus = [r["mfu"] for r in steps if r.get("mfu")]
    if mfus:
        mfu = statistics.median(mfus)
        rows.add(f"{name}: trainer MFU", f"{mfu:.3f}", f">= {mfu_target}", mfu >= mfu_target)
    else:
        rows.add(f"{name}: trainer MFU", "no peak FLOP/s known for this device (or the CPU)")


# -- the stages -----------------------------------------------------------------------------------------------------

def stage_gpt(rows: Rows, dry: bool, folder: str) -> None:
    import torch

    from training.config import ModelConfig
    from training.model import GPT

    size = (dict(dim=128, n_layers=2, n_heads=2, vocab_size=1024), 64, 2, 4, 1) if dry else \
        (dict(dim=2048, n_layers=18, n_heads=16, vocab_size=50304), 2048, 4, 30, 10)
    model, seq_len, micro, steps, warmup = size
    with world_of_one() as world:
        records, trainer = train_records(run_config(model, seq_len=seq_len, micro=micro, compile_=not dry,
                                                    folder=folder), world, steps)
        rows.add("gpt: model", f"{trainer.n_params / 1e9:.3f}B parameters, micro-batch {micro} x {seq_len} tokens, "
                               f"on {device_name()}")
        del trainer
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        cfg = ModelConfig.model_validate(model)
        with torch.device(world.device):
            bare = GPT(cfg)
        bare.init_weights(0)
        if not dry:
            for block in bare.blocks:
                block.compile()
        bare_tps = bare_tokens_per_s(bare, cfg.vocab_size, seq_len, micro, steps, warmup, lambda out: out)
    throughput_rows(rows, "gpt", records, bare_tps, warmup, 0.45, dry)


def llama_shape(dry: bool) -> dict:
    if dry:
        return dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=128, vocab_size=512)
    # ~1.2B: TinyLlama's width with 16 layers (hidden 2048, 32 heads, 4 KV heads, MLP 5632, vocabulary 32,000)
    return dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=4,
                intermediate_size=5632, vocab_size=32000)


def stage_hf(rows: Rows, dry: bool, folder: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = llama_shape(dry)
    seq_len, micro, steps, warmup = (64, 2, 4, 1) if dry else (2048, 4, 25, 8)
    with world_of_one() as world:
        records, trainer = train_records(run_config({"kind": "hf", "model_type": "llama", **shape}, seq_len=seq_len,
                                                    micro=micro, compile_=not dry, folder=folder), world, steps)
        rows.add("hf: model", f"LlamaForCausalLM {trainer.n_params / 1e9:.3f}B parameters, micro-batch {micro} x "
                              f"{seq_len} tokens")
        del trainer
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        torch.manual_seed(0)
        config = LlamaConfig(**shape, attn_implementation="sdpa", use_cache=False)
        with torch.device(world.device):
            bare = LlamaForCausalLM(config)
        if not dry:
            for layer in bare.model.layers:
                layer.compile()
        bare_tps = bare_tokens_per_s(bare, shape["vocab_size"], seq_len, micro, steps, warmup,
                                     lambda out: out.logits)
    throughput_rows(rows, "hf", records, bare_tps, warmup, 0.45, dry)


def memory_cases(dry: bool) -> list[tuple[str, dict]]:
    base = dict(strategy="ddp", checkpointing=False, accum=1)
    cases = [("ddp", base), ("ddp + checkpointing", {**base, "checkpointing": True}),
             ("fsdp", {**base, "strategy": "fsdp"}),
             ("fsdp + checkpointing", {**base, "strategy": "fsdp", "checkpointing": True}),
             ("fsdp + accumulation x2", {**base, "strategy": "fsdp", "accum": 2}),
             ("ddp + accumulation x2", {**base, "accum": 2})]
    return cases[:3] if dry else cases


def stage_memory(rows: Rows, dry: bool, folder: str) -> None:
    import gc

    import torch

    from training.memory import GIB

    cuda = torch.cuda.is_available()
    model = dict(dim=128, n_layers=2, n_heads=2, vocab_size=1024) if dry else \
        dict(dim=1024, n_layers=16, n_heads=8, vocab_size=50304)
    seq_len, micro = (64, 2) if dry else (2048, 4)
    with world_of_one() as world:
        for name, case in memory_cases(dry):
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            run = run_config(model, seq_len=seq_len, micro=micro, accum=case["accum"], strategy=case["strategy"],
                             checkpointing=case["checkpointing"], compile_=False, folder=f"{folder}/{len(rows.rows)}")
            records, trainer = train_records(run, world, 2)
            (estimate,) = [r["per_rank_gib"] for r in records if r["event"] == "memory_estimate"]
            del trainer
            if not cuda:  # no device memory to read: the stage's code path only
                rows.add(f"memory: {name}", f"estimate {estimate['total']:.2f} GiB (no CUDA: nothing to measure)")
                continue
            allocated = torch.cuda.max_memory_allocated() / GIB
            reserved = torch.cuda.max_memory_reserved() / GIB
            free, total = torch.cuda.mem_get_info()
            used = (total - free) / GIB
            tensors = estimate["total"] - estimate["cuda_context"] - estimate["nccl"] - estimate["fragmentation"]
            for measured_name, measured, estimated in (("tensors/max_allocated", allocated, tensors),
                                                       ("total/max_reserved", reserved, estimate["total"]),
                                                       ("total/device used", used, estimate["total"])):
                ratio = estimated / measured
                rows.add(f"memory: {name}: {measured_name}", f"{ratio:.3f} ({estimated:.2f} / {measured:.2f} GiB)",
                         f"1 +/- {MEMORY_BAND}", abs(ratio - 1) <= MEMORY_BAND)
            capacity = total / GIB
            rows.add(f"memory: {name}: fit verdict", f"estimate says {'fits' if estimate['total'] <= capacity else 'no'}"
                     f", device says {'fits' if used <= capacity else 'no'} ({capacity:.0f} GiB)", "the same",
                     (estimate["total"] <= capacity) == (used <= capacity))


def losses(output: str) -> dict[int, str]:
    """step -> the loss as printed (the exact float's repr), from the trainer's or the runtime's JSON records."""
    found = {}
    for line in output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == "step" and "loss" in record:
                found[record["step"]] = repr(record["loss"])
    return found


def logged_step(line: str) -> int:
    """The step of a step record, else 0."""
    if not line.startswith("{"):
        return 0
    record = json.loads(line)
    return record.get("step", 0) if record.get("event") == "step" else 0


def pods_torchrun(restarts: int = 0) -> list[str]:
    """A one-rank pod's launcher, as the compiler writes it: kubetrain_runtime.torchrun, whose ranks are forks of a
    warm process it starts (kubetrain_runtime/warm.py), so a restarted rank does not import torch again."""
    return [sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=1",
            f"--max-restarts={restarts}"]


def run_killing_at(command: list[str], env: dict, kill_at_step: int) -> str:
    """Start `command` (a torchrun agent); once it has logged `kill_at_step`, SIGKILL what torchrun started for its
    rank, which torchrun then restarts, and read on until it ends; returns what it printed. No timeout of its own:
    the driver kills the stage's whole process group at the stage's limit."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               cwd=ROOT)
    printed, killed = [], []
    for line in process.stdout:
        printed.append(line)
        if not killed and logged_step(line) >= kill_at_step:
            killed = ranks_of(process.pid)
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
    process.wait()
    if not killed:
        raise RuntimeError(f"{' '.join(command[:4])} ... ended before step {kill_at_step} had a process to kill")
    return "".join(printed)


def run_to_end(command: list[str], env: dict) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {done.returncode}: {done.stderr[-600:]}")
    return done.stdout


def bench_env(**extra: str) -> dict:
    path = os.pathsep.join([str(ROOT / "constructs"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def compare_runs(rows: Rows, name: str, reference: dict[int, str], other: dict[int, str], what: str) -> None:
    shared = sorted(set(reference) & set(other))
    differing = [step for step in shared if reference[step] != other[step]]
    figure = (f"{len(shared)} steps compared, all identical" if shared and not differing else
              f"{len(differing)} of {len(shared)} steps differ (first: step {differing[0]}: {reference[differing[0]]} "
              f"against {other[differing[0]]})" if differing else "no step to compare")
    rows.add(f"{name}: {what}", figure, "identical", bool(shared) and not differing)


def stage_resume(rows: Rows, dry: bool, folder: str) -> None:
    import yaml

    steps, kill_at = (8, 4) if dry else (40, 20)
    model = dict(dim=128, n_layers=2, n_heads=2, vocab_size=1024) if dry else \
        dict(dim=768, n_layers=8, n_heads=6, vocab_size=50304)
    outputs = {}
    for run_name in ("first", "second", "killed"):
        config = {"model": model, "data": {"seq_len": 64 if dry else 1024},
                  "batch": {"global_size": 2 if dry else 8, "micro_size": 2 if dry else 8},
                  "precision": "bf16", "max_steps": steps, "log_interval": 1,
                  "checkpoint": {"dir": f"{folder}/{run_name}", "interval": 2 if dry else 5, "async_save": False},
                  "metrics": {"port": 0}}
        path = Path(folder) / f"{run_name}.yaml"
        path.write_text(yaml.safe_dump(config))
        command = ["-m", "training", "--config", str(path)]
        if run_name == "killed":  # the rank, SIGKILLed, is restarted by torchrun and resumes
            printed = run_killing_at(pods_torchrun(restarts=1) + command, bench_env(), kill_at)
        else:
            printed = run_to_end(pods_torchrun() + command, bench_env())
        outputs[run_name] = losses(printed)
    compare_runs(rows, "resume", outputs["first"], outputs["second"], "two uninterrupted runs")
    compare_runs(rows, "resume", outputs["first"], {s: v for s, v in outputs["killed"].items() if s > kill_at},
                 f"killed (SIGKILL) after step {kill_at} and resumed, against uninterrupted")


def stage_checkpoint(rows: Rows, dry: bool, folder: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from checkpoint import make_trainer, save_then_step

    dim, layers, rounds = (64, 2, 2) if dry else (768, 12, 3)
    with world_of_one() as world:
        sync = make_trainer(dim, layers, f"{folder}/sync", False, world)
        background = make_trainer(dim, layers, f"{folder}/async", True, world)
        sync_blocked, async_blocked = [], []
        for i in range(rounds + 1):  # round 0 warms up
            sync_report, _ = save_then_step(sync)
            async_report, _ = save_then_step(background)
            if i:
                sync_blocked.append(sync_report["blocked_s"])
                async_blocked.append(async_report["blocked_s"])
        sync.close()
        background.close()
    s, a = statistics.median(sync_blocked), statistics.median(async_blocked)
    rows.add("checkpoint: async/sync time blocked", f"{a / s:.3f} ({a:.3f} s / {s:.3f} s, {sync.n_params / 1e6:.0f}M "
             "parameters from " + device_name() + " memory)" if s else "sync save took no time", "<= 0.02",
             None if dry else a / s <= 0.02)


def stage_user_loop(rows: Rows, dry: bool, folder: str) -> None:
    steps, kill_at = (12, 6) if dry else (200, 100)
    runs = {}
    for run_name in ("uninterrupted", "killed"):
        command = ["-m", "kubetrain_runtime", str(ROOT / "examples" / "ddp_minimal.py"), "--steps", str(steps),
                   "--checkpoint-dir", f"{folder}/{run_name}"]
        if run_name == "killed":  # SIGKILL the rank alone: torchrun restarts it, and it resumes
            printed = run_killing_at(pods_torchrun(restarts=1) + command, bench_env(), kill_at)
        else:
            printed = run_to_end(pods_torchrun() + command, bench_env())
        runs[run_name] = losses(printed)
    backend = "gloo" if device_name() == "cpu" else "NCCL"
    compare_runs(rows, f"user_loop ({backend})", runs["uninterrupted"],
                 {s: v for s, v in runs["killed"].items() if s > kill_at},
                 f"ddp_minimal killed after step {kill_at}, restarted by torchrun")


def ranks_of(agent: int) -> list[int]:
    """What a torchrun agent started for its ranks: its children, read from /proc (no psutil on a bare image), but
    the warm process, a fork of the agent's with the agent's command line. Killing one kills its rank (the warm
    process's fork)."""
    proc = Path("/proc")
    agent_cmdline = (proc / str(agent) / "cmdline").read_bytes()
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                # /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces: split after its ')'
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == agent and (entry / "cmdline").read_bytes() != agent_cmdline:
                    found.append(int(entry.name))
    return found


RUNNERS: dict[str, Callable[[Rows, bool, str], None]] = {
    "gpt": stage_gpt, "hf": stage_hf, "memory": stage_memory, "resume": stage_resume,
    "checkpoint": stage_checkpoint, "user_loop": stage_user_loop}


# -- the driver -----------------------------------------------------------------------------------------------------

def run_stage(name: str, out: Path, dry: bool) -> int:
    rows = Rows(out, name)
    with tempfile.TemporaryDirectory() as folder:
        RUNNERS[name](rows, dry, folder)
    return 0


def drive(stages: list[str], out: Path, dry: bool) -> int:
    """Each stage in a process of its own under its timeout; the table of every row written, whatever ended how."""
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in stages:
        timeout = DRY_RUN_TIMEOUT_S if dry else STAGES[name]
        print(f"stage {name} (up to {timeout} s)", flush=True)
        started = time.monotonic()
        command = [sys.executable, str(Path(__file__).resolve()), "--stage-process", name, "--out", str(out)]
        # A session of its own: at the limit, the stage and every process it started (trainers, torchrun, ranks) go.
        stage = subprocess.Popen(command + (["--dry-run"] if dry else []), env=bench_env(), start_new_session=True)
        try:
            code = stage.wait(timeout)
            ended = "done" if code == 0 else f"failed (exit {code})"
        except subprocess.TimeoutExpired:
            os.killpg(stage.pid, signal.SIGKILL)
            stage.wait()
            ended = f"stopped at its {timeout} s limit"
        if ended != "done":
            failed.append(name)
        (out / f"{name}.status").write_text(f"{ended} in {time.monotonic() - started:.0f} s")
    table = render_table(stages, out, dry)
    (out / "table.md").write_text(table)
    print(table)
    return 1 if failed else 0


def render_table(stages: list[str], out: Path, dry: bool) -> str:
    lines = [f"GPU bench on {device_name()}{' (dry run: toy sizes, figures mean nothing)' if dry else ''}", "",
             "| stage | check | figure | target | verdict |", "|---|---|---|---|---|"]
    for name in stages:
        rows = json.loads((out / f"{name}.json").read_text()) if (out / f"{name}.json").exists() else []
        for row in rows:
            lines.append(f"| {name} | {row['check']} | {row['figure']} | {row['target']} | {row['verdict']} |")
        status = (out / f"{name}.status").read_text() if (out / f"{name}.status").exists() else "not run"
        lines.append(f"| {name} | (stage) | {status} | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="every stage at toy sizes on the CPU")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-gpu-results")),
                        help="where each stage's rows and the table go (default: $OUT, else ./bench-gpu-results)")
    parser.add_argument("--stage", action="append", choices=list(STAGES), help="run only this stage (repeatable)")
    parser.add_argument("--stage-process", choices=list(STAGES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage_process:
        return run_stage(args.stage_process, args.out, args.dry_run)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA device is visible; run it on a GPU machine, or with --dry-run here",
              file=sys.stderr)
        return 2
    return drive(args.stage or list(STAGES), args.out, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
