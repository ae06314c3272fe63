"""Data sets of documents (parquet, JSON lines, a `datasets` save_to_disk folder), streamed and packed.

Rank r of n reads rows r, r + n, r + 2n, ... of the data set, its files read one after another in name
order (a save_to_disk folder: the order of its state.json), so the documents a rank reads do not depend
on how they are split into files; it never holds more than one batch of rows: parquet is read
a row group at a time (iter_batches), JSON lines a line at a time, and the arrow files of a
save_to_disk folder are memory-mapped. Raw text is tokenized with the local tokenizer (the same
ids on every run); each document is followed by the end-of-sequence token, and the documents are
packed back to back into sequences of seq_len + 1 tokens (the last one the next sequence's first).

Positions restart with every sequence, not with every document, and attention spans the whole
sequence, across documents: the common practice of pretraining (the EOS token marks the boundary).
Keeping documents apart would take a block-diagonal mask per sequence (seq_len^2 per sequence, and
SDPA's flash kernel refuses masks), which this loader does not pay.

The position a rank has reached (epoch, file, row, a JSON line's byte offset, the token within the
document, the rows in the files before) is a few integers, saved with every checkpoint: a resumed run reads exactly the tokens an
uninterrupted one would have. After the last file the stream starts again (epoch + 1), in the same order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from training.config import DataConfig
from kubetrain_runtime.problems import ConfigError, Problem

ROWS_PER_READ = 256  # rows read (and tokenized) at once: bounded memory, and the fast tokenizer's batch
SUFFIXES = {"parquet": (".parquet",), "jsonl": (".jsonl", ".json")}


@dataclass
class Position:
    """Where the next sequence starts: in document `row` of file `file` (a JSON line starting at byte
    `offset`), at its token `token`; `base` rows come before the file in the data set."""

    epoch: int = 0
    file: int = 0
    base: int = 0
    row: int = 0
    offset: int = 0
    token: int = 0


def unusable(path: str, field: str, message: str, fix: str, code: str = "KT234") -> ConfigError:
    return ConfigError(path, [Problem(code, f"data.{field}", message, fix)])


def data_files(cfg: DataConfig) -> list[Path]:
    """The files of the data set, in reading order, or a ConfigError (KT234) saying why there are none."""
    root = Path(cfg.path)
    fix = "mount the data volume, or fix data.path"
    if not root.exists():
        raise unusable(cfg.path, "path", f"{root} does not exist", fix)
    if cfg.source == "datasets":
        if (root / "dataset_dict.json").exists():
            raise unusable(cfg.path, "path", f"{root} holds several splits (dataset_dict.json)",
                           "point data.path at one split's folder, e.g. .../train")
        try:
            state = json.loads((root / "state.json").read_text(encoding="utf-8"))
            files = [root / entry["filename"] for entry in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise unusable(cfg.path, "path", f"{root} is no datasets save_to_disk folder ({exc})",
                           "write the data set with Dataset.save_to_disk, or use source parquet or jsonl") from None
    elif root.is_dir():
        files = sorted(p for p in root.iterdir() if p.name.endswith(SUFFIXES[cfg.source]) and p.is_file())
    else:
        files = [root]
    if not files:
        raise unusable(cfg.path, "path", f"{root} holds no {' or '.join(SUFFIXES[cfg.source])} files", fix)
    for file in files:
        try:
            with open(file, "rb") as handle:
                handle.read(1)
        except OSError as exc:
            raise unusable(cfg.path, "path", f"cannot read {file}: {exc.strerror}", fix) from None
    return files


class RowReader:
    """One rank's rows of one file (rank r of n: the data set's rows r, r + n, ...)."""

    def __init__(self, cfg: DataConfig, dp_rank: int, dp_size: int):
        self.cfg = cfg
        self.field = cfg.tokens_field or cfg.text_field
        self.dp_rank, self.dp_size = dp_rank, dp_size
        self.base = 0
        self.file_rows = 0  # the rows of the file read last, once it has been read to its end

    def mine(self, row: int) -> bool:
        return (self.base + row) % self.dp_size == self.dp_rank

    def rows(self, file: Path, base: int, row: int, offset: int) -> Iterator[tuple[int, int, Any]]:
        """(row, byte offset of its JSON line (0 for columns), value) of this rank's rows from `row` on
        (starting at byte `offset`, a JSON line's start) of a file after `base` rows of the data set."""
        self.base = base
        if self.cfg.source == "jsonl":
            yield from self._json_lines(file, row, offset)
        else:
            yield from self._columns(file, row)

    def _json_lines(self, file: Path, row: int, offset: int) -> Iterator[tuple[int, int, Any]]:
        with open(file, "rb") as handle:
            handle.seek(offset)
            for line in handle:
                start, offset = offset, offset + len(line)
                if not line.strip():
                    continue  # blank lines are no documents (and no rows)
                if self.mine(row):
                    try:
                        value = json.loads(line)[self.field]
                    except (ValueError, KeyError, TypeError):
                        raise unusable(str(file), self.field_name, f"row {row} of {file} is no JSON object with "
                                       f"{self.field!r}", "give every line a JSON object with that key") from None
                    yield row, start, value
                row += 1
        self.file_rows = row

    def _columns(self, file: Path, row: int) -> Iterator[tuple[int, int, Any]]:
        self.file_rows = row
        for first, column in self._batches(file, row):
            for index in range(max(0, row - first), len(column)):
                if self.mine(first + index):
                    yield first + index, 0, column[index].as_py()
            self.file_rows = first + len(column)

    def _batches(self, file: Path, row: int) -> Iterator[tuple[int, Any]]:
        """(first row, column) of each batch that holds rows from `row` on."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.cfg.source == "parquet":
            parquet = pq.ParquetFile(file, memory_map=True)
            self._has_field(file, parquet.schema_arrow.names)
            start, end, groups = 0, 0, []
            for group in range(parquet.num_row_groups):  # skip the row groups before `row` by their metadata
                end += parquet.metadata.row_group(group).num_rows
                if end > row:
                    groups.append(group)
                else:
                    start = end
            for batch in parquet.iter_batches(ROWS_PER_READ, row_groups=groups, columns=[self.field]):
                yield start, batch.column(0)
                start += batch.num_rows
            return
        start = 0  # an arrow stream of a save_to_disk folder, memory-mapped: skipped batches cost nothing
        with pa.memory_map(str(file), "r") as source:
            stream = pa.ipc.open_stream(source)
            self._has_field(file, stream.schema.names)
            for batch in stream:
                if start + batch.num_rows > row:
                    yield start, batch.column(self.field)
                start += batch.num_rows

    def _has_field(self, file: Path, names: list[str]) -> None:
        if self.field not in names:
            raise unusable(str(file), self.field_name, f"{file} has no column {self.field!r} (it has "
                           f"{', '.join(names)})", "set data.text_field (raw text) or data.tokens_field (token "
                           "ids) to a column of the data set")

    @property
    def field_name(self) -> str:
        return "tokens_field" if self.cfg.tokens_field else "text_field"


class DocumentLoader:
    """Packed micro-batches of one data-parallel rank; the same interface as data.ShardedLoader."""

    def __init__(self, cfg: DataConfig, vocab_size: int, micro_size: int, dp_rank: int, dp_size: int):
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.micro_size = micro_size
        self.dp_size = dp_size
        self.files = data_files(cfg)
        self.reader = RowReader(cfg, dp_rank, dp_size)
        self.tokenizer = load_tokenizer(cfg, vocab_size) if cfg.tokenizer else None
        eos = end_of_text_id(cfg, self.tokenizer)
        if eos is None or eos >= vocab_size:
            raise unusable(cfg.tokenizer or cfg.path, "eos_token_id", f"no end-of-sequence token below vocab_size "
                           f"{vocab_size} (got {eos})", "set data.eos_token_id, or use a tokenizer with an EOS "
                           "token", code="KT235")
        self.eos = eos
        self.start = Position()
        self.samples = 0  # sequences this rank has read
        self._documents: Iterator[tuple[Position, list[int]]] | None = None

    # -- documents ------------------------------------------------------------------------------

    def documents(self, at: Position) -> Iterator[tuple[Position, list[int]]]:
        """(position of the document's first token, its tokens and EOS) from `at` on, forever."""
        epoch, file, base, row, offset = at.epoch, at.file, at.base, at.row, at.offset
        while True:
            whole_pass, found = (file, row) == (0, 0), False
            while file < len(self.files):
                pending: list[tuple[Position, Any]] = []
                for row, line_offset, value in self.reader.rows(self.files[file], base, row, offset):
                    pending.append((Position(epoch, file, base, row, line_offset), value))
                    if len(pending) == ROWS_PER_READ:
                        yield from self._tokenized(pending)
                        found, pending = True, []
                if pending:
                    yield from self._tokenized(pending)
                    found = True
                file, base, row, offset = file + 1, base + self.reader.file_rows, 0, 0
            if whole_pass and not found:
                raise unusable(self.cfg.path, "path", f"rank {self.reader.dp_rank} of {self.dp_size} has no "
                               "documents: the data set has fewer rows than the data-parallel ranks",
                               "use a larger data set, or fewer ranks")
            epoch, file, base, row, offset = epoch + 1, 0, 0, 0, 0

    def _tokenized(self, pending: list[tuple[Position, Any]]) -> Iterator[tuple[Position, list[int]]]:
        if self.cfg.tokens_field:
            token_lists = [list(value or ()) for _, value in pending]
        else:
            for position, value in pending:
                if value is not None and not isinstance(value, str):
                    raise unusable(str(self.files[position.file]), "text_field", f"row {position.row} of "
                                   f"{self.files[position.file]} holds {type(value).__name__}, not text",
                                   "point data.text_field at a text column, or data.tokens_field at token ids")
            texts = [value or "" for _, value in pending]  # a null text is an empty document
            token_lists = self.tokenizer(texts, add_special_tokens=True)["input_ids"]
        for (position, _), tokens in zip(pending, token_lists, strict=True):
            if tokens and (min(tokens) < 0 or max(tokens) >= self.vocab_size):
                raise unusable(str(self.files[position.file]), self.reader.field_name,
                               f"row {position.row} of {self.files[position.file]} has token ids outside 0.."
                               f"{self.vocab_size - 1}", "tokenize the data with the model's tokenizer, or raise "
                               "the model's vocab_size")
            if not tokens or tokens[-1] != self.eos:
                tokens = [*tokens, self.eos]
            yield position, tokens

    # -- packing --------------------------------------------------------------------------------

    def next_sequence(self) -> list[int]:
        """seq_len + 1 tokens from the current position; the position moves on by seq_len."""
        if self._documents is None:
            self._documents = self.documents(self.start)
            self._current = next(self._documents)
        position, tokens = self._current
        skip, out, last = self.start.token, [], self.cfg.seq_len
        while True:
            piece = tokens[skip:skip + last + 1 - len(out)]
            if len(out) <= last < len(out) + len(piece):
                # The sequence's last token is the next one's first: the document that holds it is current.
                self.start = Position(**{**asdict(position), "token": skip + last - len(out)})
                self._current = (position, tokens)
            out += piece
            if len(out) > last:
                return out
            position, tokens = next(self._documents)
            skip = 0

    def next_batch(self):
        import torch

        rows = torch.tensor([self.next_sequence() for _ in range(self.micro_size)], dtype=torch.long)
        self.samples += self.micro_size
        return rows[:, :-1], rows[:, 1:]

    # -- the position, as data.ShardedLoader keeps it ---------------------------------------------

    @property
    def position(self) -> int:
        return self.samples

    @position.setter
    def position(self, samples: int) -> None:
        """Start over at another data-parallel size: read past `samples` sequences of this rank's shard."""
        self.start, self.samples, self._documents = Position(), 0, None
        for _ in range(samples):
            self.next_sequence()
        self.samples = samples

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.samples, "dp_size": self.dp_size, "start": asdict(self.start)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["dp_size"] != self.dp_size:
            raise ValueError("a data position is only meaningful at the data-parallel size it was saved at")
        self.samples, self.start, self._documents = state["position"], Position(**state["start"]), None


def end_of_text_id(cfg: DataConfig, tokenizer) -> int | None:
    """The token put between documents: data.eos_token_id, or the tokenizer's EOS (the export's eos too)."""
    return cfg.eos_token_id if cfg.eos_token_id is not None else getattr(tokenizer, "eos_token_id", None)


def load_tokenizer(cfg: DataConfig, vocab_size: int):
    """The local tokenizer (never downloaded), or a ConfigError (KT235) saying why it cannot be used."""
    from training.hf_model import offline

    offline()
    path = Path(cfg.tokenizer)
    if not path.is_dir():
        raise unusable(cfg.tokenizer, "tokenizer", f"{path} is no folder", "point data.tokenizer at the folder "
                       "save_pretrained wrote (tokenizer.json, tokenizer_config.json)", code="KT235")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers raises OSError, ValueError, KeyError... for a bad folder
        reason = " ".join(str(exc).split())[:300]
        raise unusable(cfg.tokenizer, "tokenizer", f"cannot load the tokenizer in {path}: {reason}",
                       "point data.tokenizer at a folder written by a tokenizer's save_pretrained", code="KT235") from None
    if len(tokenizer) > vocab_size:
        raise unusable(cfg.tokenizer, "tokenizer", f"the tokenizer has {len(tokenizer)} tokens, more than the "
                       f"model's vocab_size {vocab_size}", "use the model's own tokenizer, or raise vocab_size",
                       code="KT235")
    return tokenizer


def check_data(cfg: DataConfig, vocab_size: int) -> None:
    """Before torchrun: the files, the field and the tokenizer, by reading the first document of rank 0."""
    loader = DocumentLoader(cfg, vocab_size, micro_size=1, dp_rank=0, dp_size=1)
    file = loader.files[0]
    try:
        next(loader.documents(Position()))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a damaged or foreign file
        reason = " ".join(str(exc).split())[:300]
        raise unusable(str(file), "path", f"cannot read {file} as {cfg.source}: {reason}",
                       "check that data.source matches the files") from None
