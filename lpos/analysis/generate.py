"""Writing past the wall: a model continues a prompt one token at a time, with a KV cache.

Each new token costs one position's forward: the keys and values of everything already read
stay in a `lpos.model.KVCache`. Temperature 0 is greedy (the most likely token); otherwise the
softmax of logits / temperature, cut to the top k, is sampled with a generator seeded by
`seed`, so one seed always writes the same text. The learned model stops at its last table row:
it has no row for the next position, and sliding a window instead would quietly forget the
prompt, hiding the wall this experiment is about. A model whose longer inputs draw every position
anew (a table read at random positions: `GPT.caches_positions` False) cannot be continued from a
cache, so it reads the whole sequence again for every token.

`Writing` is the Write feature's state: several models continuing one prompt, advanced a slice of
time at a time (`advance`) so a caller can show the texts growing and stop between slices;
`marked_text` is the Markdown of one text, the training length marked where it falls.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from lpos.model import GPT, KVCache
from lpos.tokenizer import END_OF_TEXT_ID, decode

MAX_NEW_TOKENS = 512  # what the app offers; the API takes any budget
SEPARATOR = "\n\n:gray-background[⏎ end of story: the model wrote the separator between training stories ⏎]\n\n"
LEADING_SPACES = re.compile(r"^ +")  # four would start a Markdown code block


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


@dataclass
class Writing:
    """Continuations in progress: advanced a slice at a time by successive runs of the
    page's fragment, so a click on Stop (which Streamlit queues until a run ends) is seen
    within one slice. The streams hold each model's KV cache."""

    settings: tuple  # what the controls said when writing started
    prompt: list[int]
    lengths: dict[str, int]  # training length per model, where the mark goes
    streams: dict[str, Iterator[int]]
    written: dict[str, list[int]] = field(default_factory=dict)
    state: str = "writing"  # writing | done | stopped | interrupted

    def stop(self, state: str) -> None:
        self.streams.clear()  # frees the caches
        self.state = state


def start_writing(models: dict[str, GPT], prompt: list[int], *, tokens: int, sampling: Sampling,
                  lengths: dict[str, int], settings: tuple) -> Writing:
    streams = {name: stream(model, prompt, max_new_tokens=tokens, sampling=sampling)
               for name, model in models.items()}
    return Writing(settings, prompt, lengths, streams, {name: [] for name in models})


def advance(writing: Writing, *, seconds: float) -> None:
    """One token from every model in turn, until `seconds` have passed or every model is done."""
    deadline = time.monotonic() + seconds
    while writing.streams and time.monotonic() < deadline:
        for name in list(writing.streams):
            token = next(writing.streams[name], None)
            if token is None:
                del writing.streams[name]
            else:
                writing.written[name].append(token)
    if not writing.streams and writing.state == "writing":
        writing.state = "done"


def plain(text: str, *, literal: Callable[[str], str]) -> str:
    """Markdown showing `text` as the characters it is, line breaks and leading spaces kept: a
    prompt's `<b>`, `**` or `===` line is never markup (`literal` escapes Markdown, plus setext `=`)."""
    lines = [literal(line).replace("=", "\\=") for line in text.split("\n")]
    return "  \n".join(LEADING_SPACES.sub(lambda m: "\u00a0" * len(m.group()), line) for line in lines)


def readable(ids: list[int], *, literal: Callable[[str], str]) -> str:
    """Markdown of GPT-2 tokens as text, each end-of-text token a visible label, never its raw name."""
    runs, run = [], []
    for token in ids:
        if token == END_OF_TEXT_ID:
            runs.append(run)
            run = []
        else:
            run.append(token)
    return SEPARATOR.join(plain(decode(r), literal=literal) for r in runs + [run])


def marked_text(prompt: list[int], new: list[int], *, length: int, literal: Callable[[str], str]) -> str:
    """Markdown of prompt + continuation with the training length marked where it falls (`literal`
    escapes Markdown in the text)."""
    ids = prompt + new
    shown = readable(ids[:length], literal=literal)
    if len(ids) > length:
        after = readable(ids[length:], literal=literal)  # a leading space is already kept (as a no-break space)
        shown += f" :red[**⟦{length} tokens: the training length ends here⟧**]" + ("" if after[:1].isspace() else " ") + after
    return shown
