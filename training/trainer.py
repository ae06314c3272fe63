"""The training loop: one Trainer for DDP and FSDP2, with exact resume from distributed checkpoints."""

from __future__ import annotations

import hashlib
import pickle
import random
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.tensor import DTensor

from training.checkpoint import CheckpointManager, LocalCheckpoints
from training.config import RunConfig
from training.data import ShardedLoader, TokenSource
from training.distributed import World, all_gather_object, all_reduce_mean, broadcast_object
from training.ettr import EttrClock, daly_interval_s, first_start
from training.faults import FaultInjector
from training.flops import flops_per_token
from training.host_memory import keep_freed_memory
from training.metrics import device_name, peak_flops
from training.model import GPT
from training.optimizer import build_optimizer, learning_rate, set_learning_rate
from training.parallel import autocast, gradient_sync, parallelize
from training.telemetry import Telemetry
from training.watchdog import Watchdog


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# With interval "auto": saves every AUTO_FIRST_CHECKPOINT steps until AUTO_MEASURED_SAVE, whose cost decides
# the intervals. The first save pays one-time setup (staging buffers, writer threads), so it is not measured.
AUTO_FIRST_CHECKPOINT = 5
AUTO_MEASURED_SAVE = 2


class Trainer:
    def __init__(self, run: RunConfig, world: World):
        self.run = run
        self.world = world
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
        self.tiers: list[CheckpointManager | LocalCheckpoints] = [self.checkpoints, *([self.local] if self.local else [])]
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

    # -- the loop ---------------------------------------------------------------------------------

    def train(self, stop_after_step: int | None = None) -> dict[str, Any]:
        self.watchdog.start()
        self.resume()
        self.report(self.mfu_basis())
        run, last = self.run, None
        mark, steps_since, saving = time.perf_counter(), 0, 0.0
        while self.step < run.max_steps and (stop_after_step is None or self.step < stop_after_step):
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
                    self.report(self.local.save(self.step, self.state()))
                saving += time.perf_counter() - started  # saving is not training time
                self.watchdog.beat()
            for tier in self.tiers:
                self.report(tier.poll())
        self.wait_for_saves()
        self.watchdog.stop()
        finished = {"event": "finished", "step": self.step,
                    **{k: v for k, v in (last or {}).items() if k not in ("event", "step")},
                    **self.ettr.report(),
                    "weights_sha256_per_rank": all_gather_object(self.weights_digest())}
        self.report(finished)
        if self.step == run.max_steps:
            self.telemetry.finish()
        return finished

    def close(self) -> None:
        """Finish a background save and release the checkpointer's, the watchdog's and the metrics' threads."""
        self.watchdog.stop()
        self.wait_for_saves()
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
        report = self.checkpoints.save(self.step, self.state())
        if not self.choosing_interval:
            self.report(report)
            return
        # interval "auto": each tier saves alone, one after the other, to measure what it costs.
        durable = report or self.checkpoints.wait()
        local = (self.local.save(self.step, self.state()) or self.local.wait()) if self.local else None
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

    def newest_checkpoint(self) -> tuple[CheckpointManager | LocalCheckpoints, int] | None:
        """The newest checkpoint every rank can trust: a local one only where every rank finds its own
        shard complete (at this world size, which its path names), else the durable one. A tie goes to
        the local tier: the same state, read from a faster disk."""
        durable = self.checkpoints.latest()
        local = self.local.common_steps()[-1:] if self.local else []
        if local and (durable is None or local[0] >= durable):
            return self.local, local[0]
        return (self.checkpoints, durable) if durable is not None else None

    def load(self, tier: CheckpointManager | LocalCheckpoints, step: int, with_rank_state: bool) -> dict[str, Any]:
        """Load model, optimizer and progress from the checkpoint of `step`; returns its train state."""
        train = {"step": 0, "world_size": 0, "productive_s": 0.0}
        tier.load(step, {"train": train})
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state: dict[str, Any] = {"model": model_state, "optim": optim_state}
        if with_rank_state and train["world_size"] == self.world.world_size:
            state[self._rank_key] = b""
        tier.load(step, state)
        if self.local:
            self.local.discard_after(step)  # they belong to the history this load leaves
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.step = train["step"]
        self.ettr.restored(train["productive_s"])
        self.watchdog.beat()
        return {**train, "rank_state": state.get(self._rank_key)}

    def roll_back(self) -> None:
        """Too many non-finite steps in a row: return to the newest checkpoint, skipping past the
        batches that caused them (PaLM's practice): the data position is kept, not restored."""
        self.wait_for_saves()
        bad_step, newest = self.step, self.newest_checkpoint()
        self.rollbacks += 1
        if newest is None or self.rollbacks > self.run.resilience.max_rollbacks:
            raise RuntimeError(f"{int(self.worst_streak.item())} non-finite steps in a row at step {bad_step}, "
                               f"after {self.rollbacks - 1} rollbacks; lower the learning rate or check the data")
        tier, step = newest
        self.load(tier, step, with_rank_state=False)
        self.bad_streak.zero_()
        self.worst_streak.zero_()
        self.report({"event": "rollback", "from_step": bad_step, "to_step": step,
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
                     "tier": "local" if tier is self.local else "durable",
                     "saved_world_size": train["world_size"], "world_size": self.world.world_size})
