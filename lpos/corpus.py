"""Where the training text lives, how it is split, and the built-in story.

The corpus is UTF-8 text in which a line `<|endoftext|>` separates stories. It is not part of the
repository: it sits beside the project (`../shared/data`) or wherever `LPOS_DATA_DIR` says. Whole
stories are held out for validation (a fixed fraction chosen by the seed), so training, the card,
the CLI and the app all read the same held-out stream. The built-in story (`lpos/assets/story.txt`)
ships with the package, for pages and commands that must work without the corpus.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from lpos import settings
from lpos.tokenizer import END_OF_TEXT, END_OF_TEXT_ID, encode

SHIPPED_SEED = 1337  # the shipped models' training seed: their held-out split and their init_seed
PACKAGE_ROOT = Path(__file__).resolve().parent
STORY_PATH = PACKAGE_ROOT / "assets" / "story.txt"
VAL_FRACTION = 0.05


def data_dir() -> Path:
    """The corpus folder: LPOS_DATA_DIR, else `shared/data` beside the project checkout."""
    return settings.data_dir(PACKAGE_ROOT.parent.parent / "shared" / "data")


def training_seed(meta: dict) -> int:
    """The seed a checkpoint was trained with (its held-out split), the shipped seed if not recorded."""
    return int(meta.get("train_args", {}).get("seed", SHIPPED_SEED))


def corpus_files(meta: dict) -> list[Path]:
    """The files a checkpoint says it was trained on, in the data folder ([] if it does not say)."""
    return [data_dir() / name for name in meta.get("data_files", [])]


def story() -> str:
    """An original children's story of about 1,400 tokens, longer than any training window."""
    return STORY_PATH.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Corpus:
    train: torch.Tensor  # (N,) token ids of the training stories, joined by <|endoftext|>
    val: torch.Tensor  # (M,) token ids of the held-out stories
    val_tinystories: torch.Tensor  # the held-out stories of the files named tinystories* (the card's headline loss)
    sha256: str  # of the files' bytes, in the order given
    n_stories: int
    n_val_stories: int


def read_stories(paths: list[str | Path]) -> tuple[list[tuple[str, str]], str]:
    """Every story with the name of its file, and the sha256 of the files' bytes in order."""
    digest = hashlib.sha256()
    stories = []
    for path in paths:
        data = Path(path).read_bytes()
        digest.update(data)
        text = data.decode("utf-8")
        stories += [(s.strip("\n"), Path(path).name) for s in text.split(f"\n{END_OF_TEXT}\n") if s.strip()]
    return stories, digest.hexdigest()


def _held_out_set(count: int, seed: int, val_fraction: float) -> set[int]:
    """Which of `count` stories are held out: the first share of a seeded permutation."""
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed)).tolist()
    return set(order[: max(1, round(count * val_fraction))])


def _stream(stories: list[tuple[str, str]], indices) -> torch.Tensor:
    """The stories at `indices`, each encoded and followed by <|endoftext|>, as one stream."""
    ids: list[int] = []
    for i in indices:
        ids += encode(stories[i][0]) + [END_OF_TEXT_ID]
    return torch.tensor(ids, dtype=torch.long)


def load_corpus(paths: list[str | Path], *, seed: int = SHIPPED_SEED, val_fraction: float = VAL_FRACTION) -> Corpus:
    stories, sha = read_stories(paths)
    if len(stories) < 2:
        raise ValueError("the corpus needs at least two stories (separated by <|endoftext|> lines)")
    val_set = _held_out_set(len(stories), seed, val_fraction)
    train = _stream(stories, [i for i in range(len(stories)) if i not in val_set])
    val = _stream(stories, sorted(val_set))
    tinystories = _stream(stories, [i for i in sorted(val_set) if stories[i][1].startswith("tinystories")])
    return Corpus(train, val, tinystories, sha, len(stories), len(val_set))


@functools.lru_cache(maxsize=4)
def _held_out(paths: tuple[str, ...], seed: int) -> torch.Tensor:
    """load_corpus(paths, seed=seed).val, encoding only the held-out stories (a page asks for them
    on its first visit: the training stories, most of the corpus, are never encoded for it)."""
    stories, _ = read_stories(list(paths))
    if len(stories) < 2:
        raise ValueError("the corpus needs at least two stories (separated by <|endoftext|> lines)")
    return _stream(stories, sorted(_held_out_set(len(stories), seed, VAL_FRACTION)))


def held_out_stream(meta: dict, *, tokens: int | None = None) -> torch.Tensor | None:
    """The held-out stream a checkpoint's card was measured on (its first `tokens`), or None when
    its corpus files are not on this machine."""
    files = corpus_files(meta)
    if not files or not all(f.is_file() for f in files):
        return None
    val = _held_out(tuple(str(f) for f in files), training_seed(meta))
    return val if tokens is None else val[:tokens]
