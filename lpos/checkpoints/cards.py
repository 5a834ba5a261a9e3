"""The shipped models' cards without their weights: what a page that compares every shipped model reads
of each (its configuration, its meta's numbers, how many tokens it writes), from one small file,
`checkpoints/shipped.cards.pt`, instead of unpickling every checkpoint.

A checkpoint's meta holds its per-token training counts as dicts of about 11,000 entries each, two per
file; PyTorch's weights-only unpickler reads them in Python, so loading a shipped model costs about
0.1 s, nearly all of it those dicts, and a page comparing thirteen models paid that thirteen times. A
card leaves the counts and the training timeline out (the pages that draw them load the model).

Each card is keyed by its checkpoint's contents: the CRC-32 and size of every record of the file's
zip archive (a torch file is one), read from the archive's directory without reading the weights. A
checkpoint retrained or replaced no longer matches its card, and `card` then returns None: the caller
loads the model itself, so a stale file can cost time, never show another model's numbers.
Written by `python -m lpos precompute` (and `--cards-only`). Plain data only: read with
`torch.load(weights_only=True)`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from lpos.analysis.lengths import output_count
from lpos.checkpoints.build import model_config
from lpos.checkpoints.lpos_format import plain_meta
from lpos.checkpoints.payload import MAX_BYTES
from lpos.checkpoints.reading import CHECKPOINT_DIR, available, load
from lpos.model import GPTConfig
from lpos.positions import scheme_info
from lpos.tokenizer import from_data

FILE = "shipped.cards.pt"  # a dot in its stem: `available` names no model after it
VERSION = 1
LEFT_OUT = ("token_counts", "batch_token_counts", "timeline")  # what the pages that need them load the model for


@dataclass(frozen=True)
class Card:
    """A shipped model as a comparing page reads it: `config`, `meta` without LEFT_OUT (its tokenizer a
    Tokenizer, as `load` gives it), and `output_count`, how many tokens its softmax spreads over."""

    name: str
    config: GPTConfig
    meta: dict
    output_count: int

    @property
    def scheme(self):
        return scheme_info(self.config.position).for_config(self.config)

    @property
    def max_input_length(self) -> int | None:
        """As GPT.max_input_length: a table's last row, or None when positions go on for ever."""
        return self.scheme.max_length(self.config)

    @property
    def caches_positions(self) -> bool:
        """As GPT.caches_positions: False for a table read at random positions."""
        return not self.config.random_positions


def contents_key(path: Path) -> str:
    """A digest of a torch file's records (name, CRC-32, size) from its zip directory, without reading them;
    of the whole file when it is no zip archive (torch's legacy format)."""
    try:
        with zipfile.ZipFile(path) as archive:
            records = "\n".join(f"{i.filename}:{i.CRC}:{i.file_size}" for i in archive.infolist()).encode()
    except zipfile.BadZipFile:
        records = Path(path).read_bytes()
    return hashlib.blake2b(records, digest_size=16).hexdigest()


def card_of(name: str, model, meta: dict) -> Card:
    """The card of a loaded model."""
    kept = {key: value for key, value in meta.items() if key not in LEFT_OUT}
    return Card(name, model.config, kept, output_count(model))


def write_cards(names: list[str] | None = None, *, folder: Path = CHECKPOINT_DIR) -> Path:
    """Write `folder`/shipped.cards.pt for the models `names` of `folder` (every one by default, as `available`
    finds them); returns the file."""
    entries = {}
    for name in available(folder) if names is None else names:
        card = card_of(name, *load(Path(folder) / f"{name}.pt"))
        entries[name] = {"key": contents_key(folder / f"{name}.pt"), "config": dataclasses.asdict(card.config),
                         "meta": plain_meta(card.meta), "output_count": card.output_count}
    path = Path(folder) / FILE
    temporary = path.with_name(path.name + ".tmp")  # a reader never sees half a file
    torch.save({"version": VERSION, "cards": entries}, temporary)
    temporary.replace(path)
    return path


@cache
def _entries(path: Path, stamp: tuple[int, int]) -> dict:
    """The cards file's entries ({} when it is missing or of another version); `stamp` (size, mtime) reads it
    again when it is rewritten."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    return payload.get("cards", {}) if isinstance(payload, dict) and payload.get("version") == VERSION else {}


def card(name: str, *, folder: Path = CHECKPOINT_DIR) -> Card | None:
    """The shipped model `name`'s card, or None when shipped.cards.pt has none that matches its checkpoint now."""
    path, checkpoint = Path(folder) / FILE, Path(folder) / f"{name}.pt"
    if not path.is_file() or not checkpoint.is_file():
        return None
    status = path.stat()
    entry = _entries(path, (status.st_size, status.st_mtime_ns)).get(name)
    if not isinstance(entry, dict) or entry.get("key") != contents_key(checkpoint):
        return None
    meta = dict(entry["meta"])
    own = from_data(meta["tokenizer"]) if "tokenizer" in meta else None
    config, meta["tokenizer"] = model_config(entry["config"], name, MAX_BYTES, tokenizer=own)  # as `load` reads it
    return Card(name, config, meta, int(entry["output_count"]))
