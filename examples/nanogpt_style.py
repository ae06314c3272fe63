"""A nanoGPT-style train.py on kubetrain's runtime: the loop of karpathy/nanoGPT's train.py (a `while True:` counting
its own `iter_num` from 0 to max_iters, its first batch fetched before the loop and each next one inside the step,
gradient accumulation with DDP's sync on the last micro step, an evaluation at iteration 0 and every eval_interval,
`eval_only`, a cosine learning rate computed from iter_num, its own torch.save of a checkpoint), shrunk to a
byte-level model of a few thousand parameters trained on a text the script makes itself.

    torchrun --nproc-per-node=2 examples/nanogpt_style.py --max_iters=30 --checkpoint_dir=/tmp/nano

Settings are nanoGPT's `--key=value` overrides of the globals below. The lines marked `# runtime` hand it to
`kubetrain_runtime.Run` (README, "Your own loop on the runtime"): the import, `Run(...)`, `for step in run.steps():`
for `while True:` with `iter_num = step - 1` (so iteration 0's evaluation and `eval_only` keep their meaning), the
batch in hand handed over where it is fetched (`run.batch`: a resumed run gets back the batch it had fetched ahead),
and `run.log`; its own `iter_num += 1` and `break` at max_iters are gone.
"""

from __future__ import annotations

import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from kubetrain_runtime import Run  # runtime

# -- nanoGPT's configuration: globals, overridden by --key=value ---------------------------------------------
out_dir = "out"
checkpoint_dir = ""  # the runtime's checkpoints (empty: the job's KUBETRAIN_CHECKPOINT_DIR, else ./checkpoints)
eval_interval = 10
eval_iters = 2
eval_only = False
always_save_checkpoint = True  # its own checkpoint code, kept: ckpt.pt in out_dir at every evaluation
gradient_accumulation_steps = 2
batch_size = 4
block_size = 16
n_embd = 32
dropout = 0.1
learning_rate = 3e-3
max_iters = 30
weight_decay = 0.1
grad_clip = 1.0
warmup_iters = 5
min_lr = 3e-4
for arg in sys.argv[1:]:  # nanoGPT's configurator.py, in short
    key, _, value = arg.removeprefix("--").partition("=")
    if key not in globals() or key.startswith("_"):
        raise SystemExit(f"unknown config key: {key}")
    default = globals()[key]
    globals()[key] = (value.lower() in ("1", "true") if isinstance(default, bool) else type(default)(value))

# -- DDP, as nanoGPT sets it up ------------------------------------------------------------------------------
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="gloo")
    ddp_rank = int(os.environ["RANK"])
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
else:
    master_process, seed_offset = True, 0
torch.manual_seed(1337 + seed_offset)
os.makedirs(out_dir, exist_ok=True)

# -- data: bytes of a text made here, sampled at random offsets (nanoGPT's get_batch on a memmap) --------------
text = " ".join(f"{n} quick brown foxes jump over {n % 7} lazy dogs." for n in range(400)).encode()
data = torch.tensor(list(text), dtype=torch.long)
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]


def get_batch(which: str) -> tuple[torch.Tensor, torch.Tensor]:
    source = train_data if which == "train" else val_data
    ix = torch.randint(len(source) - block_size, (batch_size,))
    x = torch.stack([source[i:i + block_size] for i in ix])
    y = torch.stack([source[i + 1:i + 1 + block_size] for i in ix])
    return x, y


# -- a one-block causal transformer over bytes ---------------------------------------------------------------
class TinyGPT(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(256, n_embd)
        self.pos = torch.nn.Embedding(block_size, n_embd)
        self.qkv = torch.nn.Linear(n_embd, 3 * n_embd)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(n_embd, 2 * n_embd), torch.nn.GELU(),
                                       torch.nn.Linear(2 * n_embd, n_embd), torch.nn.Dropout(dropout))
        self.head = torch.nn.Linear(n_embd, 256)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout if self.training else 0)
        x = x + self.mlp(x)
        logits = self.head(x)
        return logits, F.cross_entropy(logits.view(-1, 256), targets.view(-1))


model = TinyGPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
if ddp:
    model = DDP(model)
raw_model = model.module if ddp else model


@torch.no_grad()
def estimate_loss() -> dict[str, float]:
    out = {}
    model.eval()
    for which in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            _, loss = model(*get_batch(which))
            losses[k] = loss.item()
        out[which] = losses.mean().item()
    model.train()
    return out


def get_lr(it: int) -> float:
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * min(1.0, ratio))) * (learning_rate - min_lr)


# -- nanoGPT's loop ------------------------------------------------------------------------------------------
run = Run(model, optimizer, max_steps=max_iters + 1, checkpoint_dir=checkpoint_dir or None)  # runtime: 0..max_iters
X, Y = run.batch(*get_batch("train"))  # runtime: was `X, Y = get_batch('train')`
best_val_loss = 1e9
for step in run.steps():  # runtime: was `while True:`
    iter_num = step - 1  # runtime: nanoGPT counts its iterations from 0
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", file=sys.stderr)
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses["val"]
            if iter_num > 0:
                torch.save({"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                            "iter_num": iter_num, "best_val_loss": best_val_loss}, os.path.join(out_dir, "ckpt.pt"))
    if iter_num == 0 and eval_only:
        break
    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = run.batch(*get_batch("train"))  # runtime: was `X, Y = get_batch('train')`
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    run.log(loss=loss * gradient_accumulation_steps)  # runtime
if ddp:
    destroy_process_group()
