"""Writing past the wall: a model continues a prompt one token at a time, with a KV cache.

Each new token costs one position's forward: the keys and values of everything already read
stay in a `lpos.model.KVCache`. Temperature 0 is greedy (the most likely token); otherwise the
softmax of logits / temperature, cut to the top k, is sampled with a generator seeded by
`seed`, so one seed always writes the same text. The learned model stops at its last table row:
it has no row for the next position, and sliding a window instead would quietly forget the
prompt, hiding the wall this experiment is about. A model whose longer inputs draw every position
anew (a table read at random positions: `GPT.caches_positions` False) cannot be continued from a
cache, so it reads the whole sequence again for every token (and scores only its last position).

A sampled token is the winner of an exponential race, as `torch.multinomial` draws one: the token
maximising p / E, E drawn Exp(1) for every token of the vocabulary (`Race`). Only the top k can win,
so only their probabilities are computed; the draws still cover the whole vocabulary, so a seed
writes what `torch.multinomial` over the whole vocabulary writes (tests/analysis checks both).

`Writing` is the Write feature's state: several models continuing one prompt in step, advanced a
slice of time at a time (`advance`) so a caller can show the texts growing and stop between slices.
Writers with one seed share one race: the n-th token of every model reads the same draws, drawn
once. `marked_text` is the Markdown of one text, the training length marked where it falls.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
    """New tokens the model can place before its table runs out (None: no wall). `model`: a GPT, or a shipped
    model's card (lpos.checkpoints.cards)."""
    rows = model.max_input_length
    return None if rows is None else max(rows - prompt_length, 0)


def writer_note(model: GPT, *, prompt_length: int, tokens: int, trained_at: int) -> str:
    """How `model` writes `tokens` more after a prompt: one position's forward per token from a KV cache, or
    the whole text again per token (a model that draws its positions anew: no cache can continue it), and
    where it stops or whether it passes its training length `trained_at`."""
    rows = room(model, prompt_length)
    how = ("one position's forward per new token, the earlier keys and values kept in a cache"
           if model.caches_positions else
           "reads its whole text again for each new token: it draws its positions anew, so no cache can continue it")
    if rows is not None and rows < tokens:
        return f"{how}; stops at its {model.max_input_length}-row table: {rows} new tokens at most"
    if prompt_length + tokens > trained_at:
        return f"{how}; writes past its training length ({trained_at} tokens)"
    return how


DRAWER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lpos-race")  # draws the next token's race ahead


class Race:
    """The exponential draws sampling reads: for the n-th token, `size` Exp(1) draws (float64) from a
    generator seeded by `seed`. Several writers of one seed and vocabulary size read the same draws
    when they write in step (each reads step n before any reads step n + 1): only the latest is kept.
    The next token's draws are drawn in DRAWER's thread while the models compute (the same generator,
    in the same order: the same numbers, sooner)."""

    def __init__(self, seed: int, size: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.size = size
        self.step = -1
        self.draws: torch.Tensor | None = None
        self.next: Future = DRAWER.submit(self._draw)

    def _draw(self) -> torch.Tensor:
        return torch.empty(self.size, dtype=torch.float64).exponential_(generator=self.generator)  # (size,)

    def at(self, step: int) -> torch.Tensor:
        """The draws (size,) of the step-th new token, drawn when a writer first asks for them."""
        if step == self.step + 1:
            self.draws = self.next.result()
            self.next = DRAWER.submit(self._draw)
            self.step = step
        elif step != self.step:
            raise ValueError(f"the race is at token {self.step}; token {step} cannot be read: writers sharing it "
                             "must write in step")
        return self.draws


def pick(scores: torch.Tensor, sampling: Sampling, *, ids: torch.Tensor | None = None,
         draws: torch.Tensor | None = None) -> int:
    """The next token from the last position's scores (V'): logits of the tokens `ids` (V', ascending),
    or of the whole vocabulary when ids is None; `draws` (vocabulary,) are the race's Exp(1) draws
    (unused when greedy). The top k (ties at the k-th kept) race: argmax of p / draws, which is what
    `torch.multinomial(p, 1)` computes over the whole vocabulary, where every other p is 0."""
    if sampling.temperature == 0:
        best = int(scores.argmax())
        return best if ids is None else int(ids[best])
    scaled = scores.double() / sampling.temperature  # (V',)
    candidates = torch.arange(scaled.numel())
    if sampling.top_k is not None and sampling.top_k < scaled.numel():
        kth = torch.topk(scaled, sampling.top_k).values[-1]
        candidates = (scaled >= kth).nonzero().squeeze(1)  # (k,) ascending, ties at the k-th kept
    tokens = candidates if ids is None else ids[candidates]  # (k,) token ids
    p = F.softmax(scaled[candidates], dim=-1)  # (k,)
    return int(tokens[(p / draws[tokens]).argmax()])


def choose(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> int:
    """The next token from the last position's logits (vocab,)."""
    draws = None
    if sampling.temperature != 0:
        draws = torch.empty(logits.numel(), dtype=torch.float64).exponential_(generator=generator)  # (vocab,)
    return pick(logits, sampling, draws=draws)


@torch.inference_mode()  # less bookkeeping per operation than no_grad; the caches never leave the stream
def stream(model: GPT, prompt: list[int], *, max_new_tokens: int, sampling: Sampling = Sampling(),
           use_cache: bool = True, race: Race | None = None) -> Iterator[int]:
    """Yield each new token as it is chosen: at most `max_new_tokens`, fewer at the learned wall.

    use_cache=False recomputes the whole sequence for every token (the reference the cache is
    tested against, and the only way for a model that draws its positions anew for each length).
    `race`: draws shared with other writers of this seed (start_writing); by default its own.
    """
    if not prompt:
        raise ValueError("the prompt is empty: give at least one token to continue")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be 0 or more, got {max_new_tokens}")
    model.check_length(len(prompt))  # a learned prompt longer than the table: the model's own message
    wall = room(model, len(prompt))
    budget = max_new_tokens if wall is None else min(max_new_tokens, wall)
    if race is None:
        race = Race(sampling.seed, model.config.vocab_size)
    use_cache = use_cache and model.caches_positions
    cache = KVCache(model.config.n_layer) if use_cache else None
    ids = list(prompt)
    step = torch.tensor([ids], dtype=torch.long)  # (1, T): the prompt first, then one token at a time
    for n in range(budget):
        hidden, _ = model.hidden_states(step if use_cache else torch.tensor([ids], dtype=torch.long),
                                        keep_attention=False, cache=cache)  # (1, T, C)
        scores = model.output_scores(hidden[0, -1])  # (V',): the last position's, over the tokens it can write
        token = pick(scores, sampling, ids=model.output_vocab, draws=race.at(n) if sampling.temperature else None)
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
    within one slice. The streams hold each model's KV cache and share their seed's race."""

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
    # one race per vocabulary size: models writing in step draw each token's race once
    races = {size: Race(sampling.seed, size) for size in {model.config.vocab_size for model in models.values()}}
    streams = {name: stream(model, prompt, max_new_tokens=tokens, sampling=sampling, race=races[model.config.vocab_size])
               for name, model in models.items()}
    return Writing(settings, prompt, lengths, streams, {name: [] for name in models})


def advance(writing: Writing, *, seconds: float) -> None:
    """One token from every model in turn (a round: the models stay in step), round after round
    until `seconds` have passed or every model is done; at least one round (seconds=0: just one)."""
    deadline = time.monotonic() + seconds
    while writing.streams:
        for name in list(writing.streams):
            token = next(writing.streams[name], None)
            if token is None:
                del writing.streams[name]
            else:
                writing.written[name].append(token)
        if time.monotonic() >= deadline:
            break
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
