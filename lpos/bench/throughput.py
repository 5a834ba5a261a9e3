"""Model side of the benchmark, no browser: tokens/s of training (`lpos.train.train` for a few steps
on a synthetic corpus at the shipped size) and of evaluation (`lpos.analysis.lengths.length_losses`), and
the seconds five shipped models take to write 256 tokens each in step (Stretching's Write, without the page)."""
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


WRITERS, WRITE_TOKENS, WRITE_GOAL_S = 5, 256, 3.0  # the goal: five shipped models write 256 tokens each within 3 s


def model_side(*, quick: bool = False) -> dict:
    schemes = [DEFAULT_SCHEME] if quick else list(SCHEMES)
    vocab = shipped_vocab()
    return {"train": [training_speed(scheme=s, steps=3 if quick else 20, vocab=vocab) for s in schemes],
            "eval": evaluation_speed(tokens=4096 if quick else 16_384, vocab=vocab),
            "write": writing_speed(runs=1 if quick else 5)}


def writing_speed(*, runs: int = 5, writers: int = WRITERS, tokens: int = WRITE_TOKENS) -> dict | None:
    """Seconds from Write to every model done (`lpos.analysis.generate.advance`), the first `writers` shipped
    models of the registered schemes loaded as the app loads them (one shared token table), sampled as the page
    samples by default, on an app process's torch threads (LPOS_TORCH_THREADS); None when fewer are installed."""
    from lpos import checkpoints, settings
    from lpos.analysis import generate
    from lpos.bench.common import spread
    from lpos.token_table import shared_initial_table
    from lpos.tokenizer import encode

    names = [name for name in SCHEMES if name in checkpoints.available()][:writers]
    if len(names) < writers:
        return None
    models = {}
    for name in names:
        model, _ = checkpoints.load(name)
        config = model.config
        model.share_token_table(shared_initial_table(config.init_seed, config.vocab_size, config.n_embd))
        models[name] = model.eval()
    prompt, seconds, threads = encode("Once upon a time"), [], torch.get_num_threads()
    torch.set_num_threads(settings.torch_threads())
    try:
        for _ in range(runs):
            job = generate.start_writing(models, prompt, tokens=tokens, sampling=generate.Sampling(),
                                         lengths=dict.fromkeys(names, 0), settings=())
            began = time.perf_counter()
            generate.advance(job, seconds=float("inf"))
            seconds.append(time.perf_counter() - began)
    finally:
        torch.set_num_threads(threads)
    written = sum(len(new) for new in job.written.values())
    return {"models": names, "tokens": tokens, "written": written, "threads": settings.torch_threads(),
            "seconds": spread(seconds), "goal_s": WRITE_GOAL_S}

