"""Token files: made from text by a byte-level tokenizer (token id = UTF-8 byte, vocabulary 256),
and checked before a run trains on one.

    python -m training.tokens README.md tokens.bin [--dtype uint16]

Enough to train on real text without downloading a tokenizer or a data set: the project's own
documentation is the corpus of the tests. The file is what `data.source: tokens` reads: token ids
back to back, no header, in `data.dtype` (the model's vocab_size must be at least 256).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from training.config import DataConfig
from kubetrain_runtime.problems import ConfigError, Problem

BYTE_VOCAB = 256
HEAD_TOKENS = 1 << 20  # tokens of a file checked against the vocabulary at start


def tokenize(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def write_token_file(sources: list[Path], out: Path, dtype: str = "uint16") -> int:
    """Tokenize the files one after another into `out`; returns the number of tokens written."""
    tokens = np.concatenate([tokenize(path.read_text(encoding="utf-8")) for path in sources]).astype(dtype)
    tokens.tofile(out)
    return len(tokens)


def open_token_file(cfg: DataConfig, vocab_size: int) -> np.memmap:
    """The token file of `data.path`, memory-mapped, or a ConfigError (KT208) saying why no run can
    train on it. Checked by `python -m training` before torch is imported, and again by each rank."""
    path = Path(cfg.path)

    def unusable(message: str, fix: str) -> ConfigError:
        return ConfigError(str(path), [Problem("KT208", "data.path", message, fix)])

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise unusable(f"cannot read the token file: {exc.strerror}", "mount the data volume, or fix data.path") from None
    itemsize = np.dtype(cfg.dtype).itemsize
    if size % itemsize:
        raise unusable(f"{size} bytes is no whole number of {cfg.dtype} tokens",
                       "set data.dtype to the dtype the file was written with")
    if size // itemsize <= cfg.seq_len + 1:
        raise unusable(f"the file holds {size // itemsize} tokens, fewer than one sequence of {cfg.seq_len}",
                       "use a larger token file or a shorter data.seq_len")
    tokens = np.memmap(path, dtype=cfg.dtype, mode="r")
    # A file written with another dtype or tokenizer shows ids beyond the vocabulary at once; the
    # head is enough to catch that without reading a large file at every start.
    highest = int(tokens[:HEAD_TOKENS].max())
    if highest >= vocab_size:
        raise unusable(f"token id {highest} is beyond vocab_size {vocab_size}",
                       f"check that the file is {cfg.dtype} and made by the model's tokenizer, or raise vocab_size")
    return tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.tokens", description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=Path, help="UTF-8 text files")
    parser.add_argument("out", type=Path, help="the token file to write")
    parser.add_argument("--dtype", choices=("uint16", "uint32"), default="uint16")
    args = parser.parse_args(argv)
    count = write_token_file(args.sources, args.out, args.dtype)
    print(f"{args.out}: {count} tokens ({args.dtype}, vocabulary {BYTE_VOCAB})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
