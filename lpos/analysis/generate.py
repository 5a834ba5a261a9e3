"""Writing past the wall: a model continues a prompt one token at a time, with a KV cache.

Each new token costs one position's forward: the keys and values of everything already read
stay in a `lpos.model.KVCache`. Temperature 0 is greedy (the most likely token); otherwise the
softmax of logits / temperature, cut to the top k, is sampled with a generator seeded by
`seed`, so one seed always writes the same text. The learned model stops at its last table row:
it has no row for the next position, and sliding a window instead would quietly forget the
prompt, hiding the wall this experiment is about. A model whose longer inputs draw every position
anew (a table read at random positions: `GPT.caches_positions` False) cannot be continued from a
cache, so it reads the whole sequence again for every token.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lpos.model import GPT, KVCache
from lpos.tokenizer import decode

MAX_NEW_TOKENS = 512  # what the app offers; the API takes any budget


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.8  # 0 = greedy
    top_k: int | None = 40  # None = the whole vocabulary
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")


@dataclass(frozen=True)
class Continuation:
    prompt: list[int]
    new: list[int]  # the tokens written, in order
    stopped_at_wall: bool  # learned: the table ran out before the budget did

    @property
    def text(self) -> str:
        return decode(self.prompt + self.new)


def room(model: GPT, prompt_length: int) -> int | None:
    """New tokens the model can place before its table runs out (None: no wall)."""
    rows = model.max_input_length
    return None if rows is None else max(rows - prompt_length, 0)


def choose(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    """The next token from the last position's logits (vocab,)."""
    if sampling.temperature == 0:
        return int(logits.argmax())
    scaled = logits.double() / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scaled.numel():
        kth = torch.topk(scaled, sampling.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return int(torch.multinomial(F.softmax(scaled, dim=-1), 1, generator=generator))


@torch.no_grad()
def stream(model: GPT, prompt: list[int], *, max_new_tokens: int, sampling: Sampling = Sampling(),
           use_cache: bool = True) -> Iterator[int]:
    """Yield each new token as it is chosen: at most `max_new_tokens`, fewer at the learned wall.

    use_cache=False recomputes the whole sequence for every token (the reference the cache is
    tested against, and the only way for a model that draws its positions anew for each length).
    """
    if not prompt:
        raise ValueError("the prompt is empty: give at least one token to continue")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be 0 or more, got {max_new_tokens}")
    model.check_length(len(prompt))  # a learned prompt longer than the table: the model's own message
    wall = room(model, len(prompt))
    budget = max_new_tokens if wall is None else min(max_new_tokens, wall)
    generator = torch.Generator().manual_seed(sampling.seed)
    use_cache = use_cache and model.caches_positions
    cache = KVCache(model.config.n_layer) if use_cache else None
    ids = list(prompt)
    step = torch.tensor([ids], dtype=torch.long)  # (1, T): the prompt first, then one token at a time
    for _ in range(budget):
        logits, _ = model(step if use_cache else torch.tensor([ids], dtype=torch.long), cache=cache)
        token = choose(logits[0, -1], sampling, generator)
        yield token
        ids.append(token)
        step = torch.tensor([[token]], dtype=torch.long)  # (1, 1)


def continue_text(model: GPT, prompt: list[int], *, max_new_tokens: int, sampling: Sampling = Sampling(),
                  use_cache: bool = True) -> Continuation:
    """The whole continuation at once (the CLI and the tests)."""
    new = list(stream(model, prompt, max_new_tokens=max_new_tokens, sampling=sampling, use_cache=use_cache))
    wall = room(model, len(prompt))
    return Continuation(list(prompt), new, stopped_at_wall=wall is not None and wall < max_new_tokens)


def split_at_length(prompt: list[int], new: list[int], *, length: int) -> tuple[str, str]:
    """The text of positions 0..length-1 and of everything after: where the training length falls."""
    ids = prompt + new
    return decode(ids[:length]), decode(ids[length:])
