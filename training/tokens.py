"""Make a token file from text: a byte-level tokenizer (token id = UTF-8 byte, vocabulary 256).

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

BYTE_VOCAB = 256


def tokenize(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def write_token_file(sources: list[Path], out: Path, dtype: str = "uint16") -> int:
    """Tokenize the files one after another into `out`; returns the number of tokens written."""
    tokens = np.concatenate([tokenize(path.read_text(encoding="utf-8")) for path in sources]).astype(dtype)
    tokens.tofile(out)
    return len(tokens)


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
