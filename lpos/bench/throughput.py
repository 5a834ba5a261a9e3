"""Model side of the benchmark, no browser: tokens/s of training (`lpos.train.train` for a few steps
on a synthetic corpus at the shipped size) and of evaluation (`lpos.analysis.lengths.length_losses`)."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from lpos.positions import DEFAULT_SCHEME, SCHEMES


def synthetic_corpus(*, tokens: int, vocab: int, seed: int = 0):
    """A corpus of uniformly drawn ids over `vocab` distinct GPT-2 tokens: the softmax cost of
    training depends on the vocabulary size, not on the text."""
    from lpos.corpus import Corpus

    g = torch.Generator().manual_seed(seed)
    words = torch.randperm(50257, generator=g)[:vocab]  # (vocab,)
    stream = words[torch.randint(0, vocab, (tokens,), generator=g)]  # (tokens,)
    split = tokens * 9 // 10
    return Corpus(stream[:split], stream[split:], stream[split:], sha256="synthetic", n_stories=1, n_val_stories=1)


def shipped_vocab(default: int = 10_000) -> int:
    """How many distinct tokens the shipped learned model's softmax runs over."""
    from lpos import checkpoints

    if DEFAULT_SCHEME not in checkpoints.available():
        return default
    return checkpoints.load(DEFAULT_SCHEME)[1].get("vocab_trained", default)


def training_speed(*, scheme: str = DEFAULT_SCHEME, steps: int = 20, vocab: int | None = None) -> dict:
    """Tokens/s of `lpos.train.train` at the shipped size (TrainArgs defaults) on a synthetic corpus."""
    from lpos.train import TrainArgs, train

    vocab = vocab or shipped_vocab()
    corpus = synthetic_corpus(tokens=30_000, vocab=vocab)
    with tempfile.TemporaryDirectory() as folder:
        args = TrainArgs(scheme=scheme, out=str(Path(folder) / "bench.pt"), steps=steps, warmup=1,
                         save_every=steps + 1, eval_lengths=(128,))
        _, meta = train(args, corpus, progress=False)
    seconds = max(meta["wall_seconds"], 0.05)  # wall_seconds is rounded to 0.1 s
    return {"scheme": scheme, "steps": steps, "tokens": meta["tokens_trained"], "seconds": seconds,
            "vocab": vocab, "tokens_per_s": meta["tokens_trained"] / seconds}


def evaluation_speed(*, scheme: str = "sinusoidal", lengths=(128, 1024), tokens: int = 16_384,
                     vocab: int | None = None) -> dict:
    """Tokens/s of `length_losses` at each evaluation length, shipped-size model, synthetic text."""
    from lpos.analysis.lengths import length_losses
    from lpos.model import untrained_model

    vocab = vocab or shipped_vocab()
    corpus = synthetic_corpus(tokens=tokens * 10 // 9 + 2, vocab=vocab)
    model = untrained_model(scheme).eval()
    model.output_vocab = torch.unique(corpus.train)
    speeds = {}
    for length in lengths:
        began = time.perf_counter()
        result = length_losses(model, corpus.train, lengths=[length])[length]
        seconds = time.perf_counter() - began
        speeds[length] = result.get("tokens", 0) / seconds if result["loss"] is not None else None
    return {"scheme": scheme, "tokens_per_s": speeds}


def model_side(*, quick: bool = False) -> dict:
    schemes = [DEFAULT_SCHEME] if quick else list(SCHEMES)
    vocab = shipped_vocab()
    return {"train": [training_speed(scheme=s, steps=3 if quick else 20, vocab=vocab) for s in schemes],
            "eval": evaluation_speed(tokens=4096 if quick else 16_384, vocab=vocab)}

