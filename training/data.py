"""Token streams, sharded over data-parallel ranks by a sampler whose position is checkpointed.

Sample `i` of the global stream is a pure function of `i` (and the seed or file), so a rank
needs only its position to resume exactly, and a new world size can recompute positions from
the step count alone.
"""

from __future__ import annotations

import numpy as np
import torch

from training.config import DATASET_SOURCES, DataConfig, RunConfig
from training.tokens import open_token_file

# The synthetic stream: arithmetic progressions modulo the vocabulary with a random start and a
# stride from this set. A model must read the first tokens to infer the stride, then can predict
# the rest: a loss that falls quickly and measurably, from data that costs nothing to make.
_STRIDES = torch.tensor([1, 2, 3, 5, 7])


class TokenSource:
    """Global sample `i` -> (seq_len + 1) tokens."""

    def __init__(self, cfg: DataConfig, vocab_size: int, seed: int):
        self.seq_len = cfg.seq_len
        self.vocab_size = vocab_size
        self.seed = seed
        self.tokens = None
        if cfg.source == "tokens":
            self.tokens = open_token_file(cfg, vocab_size)

    def samples(self, indices: torch.Tensor) -> torch.Tensor:
        if self.tokens is not None:
            windows = (len(self.tokens) - 1) // self.seq_len
            starts = (indices % windows) * self.seq_len
            rows = [torch.from_numpy(self.tokens[s:s + self.seq_len + 1].astype(np.int64)) for s in starts.tolist()]
            return torch.stack(rows)
        # Per-sample randomness from (seed, index): independent of the order samples are read in.
        mixed = (indices * 1103515245 + self.seed * 2654435761 + 12345) % 2**31  # no int64 overflow
        start = mixed % self.vocab_size
        stride = _STRIDES[(mixed // self.vocab_size) % len(_STRIDES)]
        positions = torch.arange(self.seq_len + 1)
        return (start[:, None] + stride[:, None] * positions[None, :]) % self.vocab_size


def build_loader(run: RunConfig, dp_rank: int, dp_size: int):
    """This rank's loader: documents from a data set (training/documents.py), or samples of a token stream."""
    if run.data.source in DATASET_SOURCES:
        from training.documents import DocumentLoader

        return DocumentLoader(run.data, run.model.vocab_size, run.batch.micro_size, dp_rank, dp_size)
    return ShardedLoader(TokenSource(run.data, run.model.vocab_size, run.seed), run.batch.micro_size, dp_rank, dp_size)


class ShardedLoader:
    """Micro-batches for one data-parallel rank: rank r reads global samples r, r + n, r + 2n, ..."""

    def __init__(self, source: TokenSource, micro_size: int, dp_rank: int, dp_size: int):
        self.source = source
        self.micro_size = micro_size
        self.dp_rank = dp_rank
        self.dp_size = dp_size
        self.position = 0  # samples this rank has consumed

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        local = torch.arange(self.position, self.position + self.micro_size)
        self.position += self.micro_size
        sequences = self.source.samples(local * self.dp_size + self.dp_rank)
        return sequences[:, :-1], sequences[:, 1:]

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position, "dp_size": self.dp_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["dp_size"] != self.dp_size:
            raise ValueError("a data position is only meaningful at the data-parallel size it was saved at")
        self.position = state["position"]
