"""The training loop: one Trainer for DDP and FSDP2, with exact resume from distributed checkpoints."""

from __future__ import annotations

import hashlib
import pickle
import random
import signal
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.tensor import DTensor

from kubetrain_runtime.checkpoint import CheckpointManager, LocalCheckpoints
from training.config import RunConfig
from training.data import ShardedLoader, TokenSource
from kubetrain_runtime.distributed import World, all_gather_object, all_reduce_mean, broadcast_object
from kubetrain_runtime.ettr import EttrClock, daly_interval_s, first_start
from kubetrain_runtime.failures import EXIT_DIVERGED, PermanentFailure
from kubetrain_runtime.faults import FaultInjector
from training.flops import flops_per_token
from kubetrain_runtime.host_memory import keep_freed_memory
from kubetrain_runtime.metrics import device_name, peak_flops
from training.model import GPT
from training.optimizer import build_optimizer, learning_rate, set_learning_rate
from training.parallel import autocast, gradient_sync, parallelize
from kubetrain_runtime.preemption import StopRequest
from kubetrain_runtime.problems import Problem
from kubetrain_runtime.telemetry import Telemetry
from kubetrain_runtime.watchdog import Watchdog


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# With interval "auto": saves every AUTO_FIRST_CHECKPOINT steps until AUTO_MEASURED_SAVE, whose cost decides
# the intervals. The first save pays one-time setup (staging buffers, writer threads), so it is not measured.
AUTO_FIRST_CHECKPOINT = 5
AUTO_MEASURED_SAVE = 2
DIVERGED_CODE = "KT210"

Tier = CheckpointManager | LocalCheckpoints


class Trainer:
    def __init__(self, run: RunConfig, world: World, stop: StopRequest | None = None,
                 startup: dict[str, float] | None = None):
        self.run = run
        self.world = world
        self.stop = stop  # the process's stop signals (its entry point installs them), or None: not watched
        self.startup = startup or {}  # when parts of the process's start were done: reported on resume
        keep_freed_memory()
        seed_everything(run.seed)
        with torch.device(world.device):
            model = GPT(run.model)
        model.init_weights(run.seed)
        self.n_params = sum(p.numel() for p in model.parameters())
        self.model = parallelize(model, run, world)
        self.optimizer = build_optimizer(self.model, run.optimizer)
        self.accum_steps = run.grad_accum_steps(world.world_size)
        source = TokenSource(run.data, run.model.vocab_size, run.seed)
        self.loader = ShardedLoader(source, run.batch.micro_size, dp_rank=world.rank, dp_size=world.world_size)
        self.faults = FaultInjector.from_env(world.rank)
        self.telemetry = Telemetry(run, world)
        self.checkpoints = CheckpointManager(run.checkpoint, world, self.faults)
        self.local = (LocalCheckpoints(run.checkpoint.local_dir, world, run.checkpoint.keep)
                      if run.checkpoint.local_dir else None)
        self.tiers: list[Tier] = [self.checkpoints, *([self.local] if self.local else [])]
        self.tokens_per_step = run.batch.global_size * run.data.seq_len
        self.flops_per_token = flops_per_token(run.model, run.data.seq_len)
        self.peak_flops = peak_flops(world.device)
        self.choosing_interval = run.checkpoint.interval == "auto"
        self.auto_saves = 0
        self.interval = AUTO_FIRST_CHECKPOINT if self.choosing_interval else run.checkpoint.interval
        self.local_interval = run.checkpoint.local_interval or self.interval
        self.ettr = EttrClock(broadcast_object(first_start(self.checkpoints.root) if world.is_main else None))
        self.watchdog = Watchdog(run.resilience.watchdog_floor_s, run.resilience.watchdog_factor, world.rank)
        # Counted on the device, so that a skipped step costs no host sync; read at log steps.
        self.bad_streak = torch.zeros((), device=world.device)
        self.worst_streak = torch.zeros((), device=world.device)  # since the last log step
        self.skipped = torch.zeros((), device=world.device)
        self.rollbacks = 0
        self.step = 0
        self.durable_step: int | None = None  # the step of the newest durable save, made or loaded
        self.longest_save_s = 0.0
        if stop is not None:
            stop.join(world.world_size)
            # After a stop signal, no step for this long means a peer is gone: a step, or a save, takes less.
            stop.stall_s = lambda: max(5.0, 3 * self.watchdog.median_step_s(), 2 * self.longest_save_s)
            stop.step_s = self.watchdog.median_step_s
        self.startup["trainer"] = time.time()

    # -- the loop ---------------------------------------------------------------------------------

    def train(self, stop_after_step: int | None = None) -> dict[str, Any]:
        self.watchdog.start()
        self.resume()
        self.report(self.mfu_basis())
        run, last = self.run, None
        mark, steps_since, saving = time.perf_counter(), 0, 0.0
        while self.step < run.max_steps and (stop_after_step is None or self.step < stop_after_step):
            if self.stop is not None and self.stop.agreed_now():
                return self.stopped()
            self.step += 1
            started = time.perf_counter()
            self.faults.before_step(self.step)
            loss, grad_norm = self.train_step()
            self.watchdog.beat(time.perf_counter() - started)
            steps_since += 1
            final = self.step == run.max_steps
            if self.step % run.log_interval == 0 or final:
                # The .item() below waits for the device, so the time is the steps' real time.
                loss = all_reduce_mean(loss).item()
                step_time = (time.perf_counter() - mark - saving) / steps_since
                last = self.log_step(loss, grad_norm, step_time)
                mark, steps_since, saving = time.perf_counter(), 0, 0.0
                if self.worst_streak.item() >= run.resilience.max_bad_steps:
                    self.roll_back()
                    continue
                self.worst_streak.zero_()
            # Productive: the step and its logging, the time that moved training on. Checkpoint
            # saves are not: they are the price of resilience, which ETTR is there to show.
            self.ettr.step_done(time.perf_counter() - started)
            durable_due = self.step % self.interval == 0 or final
            if durable_due or (self.local and self.step % self.local_interval == 0):
                started = time.perf_counter()
                if durable_due:
                    self.save()
                else:
                    self.report(self.local.save(self.step, self.state))
                saving += time.perf_counter() - started  # saving is not training time
                self.longest_save_s = max(self.longest_save_s, time.perf_counter() - started)
                self.watchdog.beat()
            for tier in self.tiers:
                self.report(tier.poll())
        self.wait_for_saves()
        self.watchdog.stop()
        if self.stop is not None:
            self.stop.close()
        finished = {"event": "finished", "step": self.step,
                    **{k: v for k, v in (last or {}).items() if k not in ("event", "step")},
                    **self.ettr.report(),
                    "weights_sha256_per_rank": all_gather_object(self.weights_digest())}
        self.report(finished)
        if self.step == run.max_steps:
            self.telemetry.finish()
        return finished

    def stopped(self) -> dict[str, Any]:
        """The ranks agreed to stop (a stop signal): finish the saves in flight, save the step reached to the
        durable tier (the node-local one goes with the pod) unless it is there already, and say so."""
        started = time.perf_counter()
        self.watchdog.stop()  # the stop budget bounds what follows
        self.wait_for_saves()
        if self.step > 0 and self.durable_step != self.step:
            self.report(self.checkpoints.save(self.step, self.state) or self.checkpoints.wait())
            self.durable_step = self.step
        record = {"event": "stopped", "signal": signal.Signals(self.stop.signum).name if self.stop.signum else None,
                  "step": self.step, "checkpoint_step": self.durable_step,
                  "save_s": time.perf_counter() - started, "budget_left_s": self.stop.remaining_s()}
        self.report(record)
        self.stop.close()
        return record

    def close(self, wait: bool = True) -> None:
        """Finish a background save (or, when the process is failing, abandon it) and release the
        checkpointer's, the watchdog's and the metrics' threads."""
        self.watchdog.stop()
        for tier in self.tiers:
            if wait:
                self.report(tier.wait())
            else:
                tier.abandon()
        for tier in self.tiers:
            tier.close()
        self.telemetry.close()

    def train_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        set_learning_rate(self.optimizer, learning_rate(self.step, self.run.optimizer, self.run.max_steps))
        total = torch.zeros((), device=self.world.device)
        poison = self.faults.poisons_loss(self.step)
        for micro in range(self.accum_steps):
            inputs, targets = (t.to(self.world.device, non_blocking=True) for t in self.loader.next_batch())
            with gradient_sync(self.model, micro == self.accum_steps - 1), autocast(self.run, self.world):
                # The logits get no name: the backward needs only log-softmax's output, so the largest
                # activation is freed once the loss is computed instead of living through the backward.
                loss = F.cross_entropy(self.model(inputs).flatten(0, 1).float(), targets.flatten())
                if poison:
                    loss = loss * float("nan")
                (loss / self.accum_steps).backward()
            total += loss.detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.run.optimizer.grad_clip)
        norm = grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm
        # The norm is of the all-reduced gradients, so every rank reaches the same verdict. The
        # fused optimizer reads found_inf on the device and leaves weights, moments and its step
        # count untouched when it is 1: a skipped update without a host sync.
        bad = (~torch.isfinite(norm)).float()
        self.optimizer.found_inf = bad
        self.bad_streak = (self.bad_streak + 1) * bad
        self.worst_streak = torch.maximum(self.worst_streak, self.bad_streak)
        self.skipped += bad
        for tier in self.tiers:
            tier.wait_for_staging()  # a background save must have copied the weights first
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total / self.accum_steps, norm

    def log_step(self, loss: float, grad_norm: torch.Tensor, step_time: float) -> dict[str, Any]:
        tokens_per_s = self.tokens_per_step / step_time
        record = {"event": "step", "step": self.step, "loss": loss, "grad_norm": grad_norm.item(),
                  "lr": self.optimizer.param_groups[0]["lr"], "tokens_per_s": tokens_per_s, "step_time_s": step_time,
                  "skipped_steps": int(self.skipped.item()), "ettr": self.ettr.report()["ettr"]}
        if self.peak_flops:
            record["mfu"] = self.flops_per_token * tokens_per_s / self.world.world_size / self.peak_flops
        self.report(record)
        return record

    def mfu_basis(self) -> dict[str, Any]:
        """What the step records' `mfu` rests on, once per process: training/flops.py's FLOPs per token (the
        formula `kubetrain cost` estimates with) and the device's peak, or why there is no MFU."""
        device = device_name(self.world.device)
        basis: dict[str, Any] = {"event": "mfu_basis", "flops_per_token": self.flops_per_token, "device": device,
                                 "peak_flops": self.peak_flops}
        if not self.peak_flops:
            basis["note"] = f"no MFU: {device} has no known bf16 peak FLOP/s (training/flops.py)"
        return basis

    def weights_digest(self) -> str:
        """A hash of the full weights, by parameter name: replicas must agree, and so must runs
        that should have trained the same model (resumed, or reloaded at another world size)."""
        digest = hashlib.sha256()
        model_state, _ = get_state_dict(self.model, [])
        for name in sorted(model_state):
            tensor = model_state[name]
            if isinstance(tensor, DTensor):
                tensor = tensor.full_tensor()
            digest.update(name.encode())
            digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    # -- checkpoints ------------------------------------------------------------------------------

    @property
    def _rank_key(self) -> str:
        # Per-rank key: DCP keeps one copy of keys that are identical across ranks.
        return f"rank{self.world.rank}"

    def _rank_state(self) -> bytes:
        rng = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
        if self.world.device_type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.world.device)
        return pickle.dumps({"rng": rng, "data": self.loader.state_dict()})

    def _restore_rank_state(self, blob: bytes) -> None:
        state = pickle.loads(blob)
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        if "cuda" in rng:
            torch.cuda.set_rng_state(rng["cuda"], self.world.device)
        self.loader.load_state_dict(state["data"])

    def state(self) -> dict[str, Any]:
        """What a checkpoint of either tier holds; the steps so far count as kept from now on."""
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optim": optim_state,
                "train": {"step": self.step, "world_size": self.world.world_size,
                          "productive_s": self.ettr.checkpointed()},
                self._rank_key: self._rank_state()}

    def save(self) -> None:
        """A durable save (which makes a local one at the same step redundant)."""
        report = self.checkpoints.save(self.step, self.state)
        self.durable_step = self.step
        if not self.choosing_interval:
            self.report(report)
            return
        # interval "auto": each tier saves alone, one after the other, to measure what it costs.
        durable = report or self.checkpoints.wait()
        local = (self.local.save(self.step, self.state) or self.local.wait()) if self.local else None
        self.report(durable)
        self.report(local)
        self.auto_saves += 1
        if self.auto_saves == AUTO_MEASURED_SAVE:
            self.choose_intervals(durable, local)

    def choose_intervals(self, durable: dict[str, Any], local: dict[str, Any] | None) -> None:
        """interval "auto": Daly's interval of each tier, for its measured save cost and the configured
        MTBF; the durable interval is a multiple of the local one, so the cheap tier bounds lost work."""
        self.choosing_interval = False
        mtbf, step_s = self.run.resilience.mtbf_s, self.watchdog.median_step_s()

        def steps(cost_s: float) -> int:
            return max(1, round(daly_interval_s(cost_s, mtbf) / step_s))

        # What a save holds the training thread while training goes on: not the wait for its writes
        # that this first save, measured alone, ended with.
        durable_steps = steps(durable["staging_blocked_s"])
        local_steps = steps(local["staging_blocked_s"]) if local else durable_steps
        if local_steps < durable_steps:
            durable_steps = durable_steps // local_steps * local_steps
        else:
            local_steps = durable_steps  # the local tier saves nothing the durable one does not
        # Rank 0 decides: every rank must save at the same steps.
        self.interval, self.local_interval = broadcast_object(
            (durable_steps, local_steps) if self.world.is_main else None)
        decision = {"event": "checkpoint_interval", "steps": self.interval, "interval_s": self.interval * step_s,
                    "save_cost_s": durable["staging_blocked_s"], "step_time_s": step_s, "mtbf_s": mtbf, "method": "daly"}
        if local:
            decision |= {"local_steps": self.local_interval, "local_save_cost_s": local["staging_blocked_s"]}
        self.report(decision)

    def wait_for_saves(self) -> None:
        """Finish every tier's background save (before a load, and at the end)."""
        for tier in self.tiers:
            self.report(tier.wait())

    def report(self, record: dict[str, Any] | None) -> None:
        self.telemetry.observe(record)

    def newest_checkpoint(self) -> tuple[Tier, int] | None:
        """The newest checkpoint every rank can trust: marked and verified, newest first on either tier (a
        local one counts only where every rank has its own copy, at this world size, which its path names).
        A tie goes to the local tier: the same state, read from a faster disk. Each checkpoint that fails
        verification is reported, with why, and the next newest is tried (the same on every rank)."""
        candidates = [(step, 0, self.checkpoints) for step in self.checkpoints.candidates()]
        if self.local:
            candidates += [(step, 1, self.local) for step in self.local.candidates()]
        for step, _, tier in sorted(candidates, key=lambda c: c[:2], reverse=True):
            reason = tier.verify_everywhere(step)
            if reason is None:
                return tier, step
            if self.world.is_main:
                print(f"warning: skipping the {tier.tier} checkpoint {tier.step_dir(step)}: {reason}; trying the "
                      "next newest", file=sys.stderr, flush=True)
            self.report({"event": "checkpoint_skipped", "tier": tier.tier, "step": step,
                         "path": str(tier.step_dir(step)), "reason": reason})
        return None

    def load(self, tier: Tier, step: int, with_rank_state: bool) -> dict[str, Any]:
        """Load model, optimizer and progress from the checkpoint of `step`; returns its train state. Every
        later checkpoint, on either tier, belongs to the history this load leaves, and is removed."""
        train = {"step": 0, "world_size": 0, "productive_s": 0.0}
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state: dict[str, Any] = {"train": train, "model": model_state, "optim": optim_state}
        if with_rank_state and self._rank_key in tier.keys(step):
            state[self._rank_key] = b""
        tier.load(step, state)  # one read: DCP's per-item cost is most of a small checkpoint's load
        if train["world_size"] != self.world.world_size:
            state.pop(self._rank_key, None)  # another world's RNG streams and data positions
        tier.verified = step
        for each in self.tiers:
            each.discard_after(step)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.step = train["step"]
        self.durable_step = step if tier is self.checkpoints else None
        self.ettr.restored(train["productive_s"])
        self.watchdog.beat()
        return {**train, "rank_state": state.get(self._rank_key)}

    def roll_back(self) -> None:
        """Too many non-finite steps in a row: return to the newest checkpoint, skipping past the
        batches that caused them (PaLM's practice): the data position is kept, not restored. Every save in
        flight is complete first, so the checkpoint chosen is the same in every run with the same faults."""
        self.wait_for_saves()
        bad_step, streak = self.step, int(self.worst_streak.item())
        self.rollbacks += 1
        newest = self.newest_checkpoint() if self.rollbacks <= self.run.resilience.max_rollbacks else None
        if newest is None:
            reason = (f"after {self.rollbacks - 1} rollbacks" if self.rollbacks > self.run.resilience.max_rollbacks
                      else "with no checkpoint to roll back to")
            raise PermanentFailure(EXIT_DIVERGED, "training", Problem(
                DIVERGED_CODE, "resilience.max_rollbacks",
                f"{streak} non-finite steps in a row at step {bad_step}, {reason}: the run diverges",
                "lower optimizer.lr (or raise warmup_steps), check the data for bad samples, then restart the job"))
        tier, step = newest
        self.load(tier, step, with_rank_state=False)
        self.bad_streak.zero_()
        self.worst_streak.zero_()
        self.report({"event": "rollback", "from_step": bad_step, "to_step": step, "tier": tier.tier,
                     "data_position": self.loader.position})

    def resume(self) -> None:
        newest = self.newest_checkpoint()
        if newest is None:
            return
        tier, step = newest
        train = self.load(tier, step, with_rank_state=True)
        if train["rank_state"] is not None:
            self._restore_rank_state(train["rank_state"])
        else:
            # Another world size: RNG streams cannot carry over, but the data position can be
            # recomputed, since every rank consumed an equal share of the global samples.
            self.loader.position = self.step * self.run.batch.global_size // self.world.world_size
        self.report({"event": "resumed", "step": self.step, "from": str(tier.step_dir(step)),
                     "tier": tier.tier, "saved_world_size": train["world_size"], "world_size": self.world.world_size,
                     "startup": {**self.startup, "resumed": time.time()}})
