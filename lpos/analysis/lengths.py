"""Loss against evaluation length, per-token loss along a text, and the unigram baseline.

Loss at length L is the mean next-token loss over non-overlapping windows of L tokens of the held-out stream
(Press et al. 2021 evaluate the same way). When the model's softmax runs over a corpus vocabulary, targets outside
it are left out and their share is reported separately: the model gives them probability zero. The readings at
the end turn measured numbers into sentences, so the app never states a result it did not measure."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.model import GPT
from lpos.positions import REGISTRY
from lpos.positions.alibi import Alibi


def output_count(model: GPT) -> int:
    """How many tokens the model's softmax spreads over: its output vocabulary when it has one, else
    every row of its output head (50,257 for GPT-2's; 65 for tiny Shakespeare's characters)."""
    return len(model.output_vocab) if model.output_vocab is not None else model.config.vocab_size


def uniform_guess_sentence(model: GPT) -> str:
    """"ln(50,257) ≈ 10.8": the loss of an even guess over the model's outputs, computed."""
    outputs = output_count(model)
    return f"ln({outputs:,}) ≈ {math.log(outputs):.1f}"


def not_applicable(model: GPT, length: int) -> str | None:
    """Why `model` cannot be evaluated at `length`, or None if it can."""
    rows = model.max_input_length
    if rows is not None and length > rows:
        return f"n/a: the table has {rows} rows"
    return None


@torch.no_grad()
def token_losses(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """Next-token loss at every position of one sequence (T,) -> (T-1,); NaN where the target
    is outside the model's vocabulary."""
    return model.vocab_loss(ids[None, :-1], ids[None, 1:], reduction="none")[0]


@torch.no_grad()
def length_losses(model: GPT, stream: torch.Tensor, *, lengths=(64, 128, 256, 512, 1024), batch_size: int = 8) -> dict:
    """{length: {"loss": mean loss, "windows": n, "tokens": n}} or {"loss": None, "note": why}."""
    results = {}
    for length in lengths:
        note = not_applicable(model, length)
        n = (len(stream) - 1) // length
        if note or n <= 0:
            results[length] = {"loss": None, "note": note or "n/a: the text is shorter than this length"}
            continue
        total, count = 0.0, 0
        for first in range(0, n, batch_size):
            rows = range(first, min(n, first + batch_size))
            x = torch.stack([stream[i * length : (i + 1) * length] for i in rows])  # (b, L)
            y = torch.stack([stream[i * length + 1 : (i + 1) * length + 1] for i in rows])  # (b, L)
            losses = model.vocab_loss(x, y, reduction="none")
            total += float(losses.nansum())
            count += int((~losses.isnan()).sum())
        if count == 0:
            results[length] = {"loss": None, "note": "n/a: no target among the tokens its softmax covers"}
            continue
        results[length] = {"loss": round(total / count, 4), "windows": n, "tokens": count}
    return results


def unigram_loss(counts: Counter, stream: torch.Tensor) -> float:
    """Loss of predicting each held-out token by its training frequency alone (in-vocab tokens)."""
    total = sum(counts.values())
    known = [counts[t] for t in stream.tolist() if t in counts]
    return round(sum(-math.log(c / total) for c in known) / len(known), 4)


@dataclass(frozen=True)
class LossCurve:
    losses: np.ndarray  # (N,) loss of predicting token i+1 from tokens 0..i; NaN outside the vocabulary
    rolling: np.ndarray  # (N,) mean of the last `window` losses, NaN left out
    window: int
    text_tokens: int  # tokens in the whole text, scored or not
    wall: int | None  # learned: the first position without a table row, when the text reaches it

    @property
    def outside_vocabulary(self) -> int:
        """How many targets the model cannot score (the curve's gaps)."""
        return int(np.isnan(self.losses).sum())


def loss_along_text(model: GPT, ids: list[int], *, window: int = 32) -> LossCurve:
    """Per-token loss along `ids`; a learned table is scored up to its last row and no further."""
    if len(ids) < 2:
        raise ValueError("a loss along the text needs at least two tokens: one to read, one to predict")
    rows = model.max_input_length
    wall = rows if rows is not None and len(ids) > rows + 1 else None
    scored = ids[: rows + 1] if wall is not None else ids
    losses = token_losses(model, torch.tensor(scored, dtype=torch.long)).numpy()
    rolling = pd.Series(losses).rolling(window, min_periods=1).mean().to_numpy()
    return LossCurve(losses=losses, rolling=rolling, window=window, text_tokens=len(ids), wall=wall)


@torch.no_grad()
def sliding_losses(model: GPT, ids: list[int], *, window: int, batch_size: int = 64) -> np.ndarray:
    """The same predictions as loss_along_text, each read with at most the `window` - 1 tokens before it:
    prediction j (of token j + 1) reads tokens j - window + 1 .. j, a sliding window that never puts a token
    past position window - 1, so nothing is extrapolated while every prediction keeps a full window of
    context (fresh windows would leave the first tokens of each with almost none). Through the model's own
    forward; only each window's last position is scored. (N,) for N = len(ids) - 1, NaN outside the
    vocabulary; the first `window` predictions are the full-context ones."""
    if len(ids) < 2:
        return np.zeros(0, dtype=np.float32)
    stream = torch.tensor(ids, dtype=torch.long)
    out = [token_losses(model, stream[: window + 1]).numpy()]
    ends = range(window, len(ids) - 1)  # the last token each window reads
    vocab = model.output_vocab if model.output_vocab is not None else torch.arange(model.config.vocab_size)
    lookup = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
    lookup[vocab] = torch.arange(len(vocab))
    for first in range(0, len(ends), batch_size):
        last = ends[first : first + batch_size]
        x = torch.stack([stream[j - window + 1 : j + 1] for j in last])  # (b, window)
        index = lookup[stream[[j + 1 for j in last]]]  # (b,) each target's place in the output vocabulary
        hidden, _ = model.hidden_states(x, keep_attention=False)
        logits = hidden[:, -1] @ model.vocab_rows().T + model.vocab_bias()  # as vocab_loss scores a position
        losses = torch.nn.functional.cross_entropy(logits, index.clamp(min=0), reduction="none")
        out.append(losses.masked_fill(index < 0, float("nan")).numpy())
    return np.concatenate(out)


def window_rows(model: GPT, window: int) -> tuple[int, int] | None:
    """The first and last table row a `window`-token input reads, when those are not its positions
    0..window-1 (a table read at random positions); None when they are, or when nothing is added."""
    if not model.scheme.adds_rows:
        return None
    read = model.scheme.input_positions(model.config, window, 0)  # (window,)
    if torch.equal(read, torch.arange(window)):
        return None
    return int(read[0]), int(read[-1])


def sliding_sentence(window: int, *, rows: tuple[int, int] | None = None) -> str:
    """What the sliding baseline reads, for a window of `window` tokens; `rows` (window_rows) when its
    table rows are not its positions."""
    before = window - 1
    where = (f"its tokens at table rows {rows[0]:,} to {rows[1]:,}: this table is read at random positions"
             if rows is not None else f"so no position past {before:,}")
    return (f"each read with only the {before:,} token{'s' if before != 1 else ''} before it (a sliding "
            f"{window:,}-token window, {where})")


def training_length(meta: dict, model: GPT) -> int:
    """The longest window the model was trained on: its max_length when training used shorter windows
    than its block size (`--max-length`), else its block size (the model's, when meta does not say). `model`: a GPT,
    or what else has its `config` (a shipped model's card, lpos.checkpoints.cards)."""
    args = meta.get("train_args", {})
    return int(args.get("max_length") or args.get("block_size", model.config.block_size))


def loss_table(meta: dict) -> dict[int, dict]:
    """A model card's loss by evaluation length with int keys in increasing order ({} if absent)."""
    table = meta.get("loss_by_length") or {}
    return {int(length): dict(entry) for length, entry in sorted(table.items(), key=lambda item: int(item[0]))}


def _mean(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else None


def _signed(change: float) -> str:
    """"+0.53", "-0.06"; "0.00" for a change that rounds to nothing (never "-0.00")."""
    return f"{change:+.2f}" if round(change, 2) != 0 else "0.00"


def curve_reading(curve: LossCurve, *, train_length: int, baseline: np.ndarray | None = None,
                  rows: tuple[int, int] | None = None) -> str:
    """What the live curve shows, in numbers. Past the training length the same tokens are compared two
    ways: read with the whole text before them, and read with a sliding window of the training length
    (`baseline`, sliding_losses): the difference is what reading past the training length costs or gains.
    Without a baseline only the two parts of the text are compared, and the sentence says they differ.
    `rows`: the table rows a window reads, when they are not its positions (window_rows)."""
    within, beyond = _mean(curve.losses[:train_length]), _mean(curve.losses[train_length:])
    if within is None:
        return ("No token of this text can be predicted: the model's softmax covers only the tokens it saw in "
                "training, so there is no loss to show.")
    lines = [f"Mean loss over the first {min(train_length, len(curve.losses))} predictions: **{within:.2f}**."]
    if beyond is not None:
        later = len(curve.losses) - train_length
        fresh = _mean(baseline[train_length : len(curve.losses)]) if baseline is not None else None
        if fresh is not None:
            lines.append(f"The {later} predictions past the training length ({train_length} tokens), read with the "
                         f"whole text before them: **{beyond:.2f}**; the same tokens {sliding_sentence(train_length, rows=rows)}: "
                         f"**{fresh:.2f}**. Reading past the training length changes their loss by "
                         f"**{_signed(beyond - fresh)}**.")
        else:
            lines.append(f"The {later} predictions past the training length ({train_length} tokens): **{beyond:.2f}** "
                         "(other text than the first part, so not a measure of extrapolation on its own).")
    if curve.wall is not None:
        lines.append(f"The learned table has {curve.wall} rows, so the last {curve.text_tokens - curve.wall - 1} "
                     f"of the {curve.text_tokens:,} tokens read here cannot be scored at all.")
    elif beyond is None:
        # a text of train_length + 1 tokens is longer than the training length, yet its last token is only predicted
        lines.append(f"No prediction here reads more than the training length ({train_length} tokens): that takes at "
                     f"least {train_length + 2} tokens of text; paste a longer one or use the story to go past it.")
    return " ".join(lines)


# How far above an even guess a loss must be before the tokenizer is doubted: a model whose weights are still near
# their start (a file that says it trained but barely did) sits just above ln(outputs), by half the variance of its
# logits (about 0.1 nats at width 768); a trained model reading another tokenizer's ids sits nats above (one
# such file: 11.50 against ln(512) = 6.24).
WRONG_TOKENIZER_MARGIN = 0.5


def wrong_tokenizer_sentence(curve: LossCurve, model: GPT, *, source: str = "", text: str = "this text") -> str:
    """"" or a warning when the model's mean loss on this text is worse than guessing evenly over its outputs (by
    more than WRONG_TOKENIZER_MARGIN): a trained model that does that is most likely reading another tokenizer's
    ids (a tokenizer of the right size
    and the wrong content loads without complaint). `source`: how the file was read (lpos.checkpoints); `text`:
    the text the curve was read on, named for the reader."""
    mean, outputs = _mean(curve.losses), output_count(model)
    if mean is None or mean <= math.log(outputs) + WRONG_TOKENIZER_MARGIN:
        return ""
    said = (f"This model's mean loss on {text}, {mean:.2f}, is worse than guessing evenly over its {outputs:,} "
            f"tokens ({uniform_guess_sentence(model)}): the tokenizer in use is probably not the one it was trained with.")
    if source.startswith("llama2.c"):
        said += (" A llama2.c model.bin needs the tokenizer it was trained with beside it: tokenizer.model for "
                 "Meta's 32,000 tokens, or the tok512.model (tok<N>.model) that llama2.c's train_vocab.py wrote for a "
                 "custom vocabulary.")
    return said


def length_reading(tables: dict[str, dict[int, dict]], *, train_length: int) -> str:
    """Markdown: what the loss-by-length tables of several schemes say, from their numbers."""
    at_train = {name: t[train_length]["loss"] for name, t in tables.items()
                if train_length in t and t[train_length]["loss"] is not None}
    if not at_train:
        return "No model card holds a loss at the training length yet."
    best, worst = min(at_train, key=at_train.get), max(at_train, key=at_train.get)
    if best == worst:
        lines = [f"- At the training length ({train_length} tokens) the loss is **{at_train[best]:.3f}** ({best})."]
    else:
        lines = [f"- At the training length ({train_length} tokens) the losses run from **{at_train[best]:.3f}** "
                 f"({best}) to **{at_train[worst]:.3f}** ({worst})."]
    longest = max(length for t in tables.values() for length in t)
    change = {name: tables[name][longest]["loss"] - at_train[name] for name in at_train
              if longest in tables[name] and tables[name][longest]["loss"] is not None}
    for name in sorted(change, key=change.get):
        lines.append(f"- **{name}** at {longest} tokens ({longest // train_length}× the training length): "
                     f"{tables[name][longest]['loss']:.3f}, {change[name]:+.3f} against {train_length}.")
    lines += [f"- **{name}** has no number past its wall: {table.get(longest, {}).get('note', 'n/a').removeprefix('n/a: ')}."
              for name, table in tables.items() if table.get(longest, {}).get("loss") is None and name in at_train]
    if len(change) > 1:
        steadiest, frailest = min(change, key=change.get), max(change, key=change.get)
        verdict = (f"Here **{steadiest}** rises least from {train_length} to {longest} tokens "
                   f"({change[steadiest]:+.3f}) and **{frailest}** most ({change[frailest]:+.3f}).")
        at_longest = {name: tables[name][longest]["loss"] for name in change}
        lowest = min(at_longest, key=at_longest.get)
        verdict += (f" It also has the lowest loss at {longest} tokens." if lowest == steadiest else
                    f" The lowest loss at {longest} tokens is **{lowest}**'s ({at_longest[lowest]:.3f}, against "
                    f"{at_longest[steadiest]:.3f}): it starts lower, and rising least is not ending lowest.")
        echo = isinstance(REGISTRY.get(steadiest), Alibi)
        lines.append(f"- {verdict} " + ("That echoes Press et al. (2021): ALiBi extrapolates where added positions do "
                                         "not." if echo else "Press et al. (2021) found ALiBi best on a far larger "
                                         "model and corpus; this small, briefly trained model ranks differently."))
    return "\n".join(lines)


def rotation_variants_reading(tables: dict[str, dict[int, dict]], *, train_length: int) -> str:
    """Markdown: each shipped model whose scheme rotates only part of what RoPE rotates (a share of columns, of pairs,
    of layers) against the model that rotates everything, at the training length and the longest measured, beside
    what its paper reports; "" when the cards hold no such pair."""
    def loss(name: str, length: int) -> float | None:
        return tables.get(name, {}).get(length, {}).get("loss")

    schemes = {name: REGISTRY[name] for name in tables if name in REGISTRY and REGISTRY[name].shows("rotation")}
    full = next((name for name, scheme in schemes.items() if scheme.rotates_fully and loss(name, train_length)), None)
    if full is None:
        return ""
    longest = max(length for length in tables[full] if loss(full, length) is not None)
    lines = []
    for name, scheme in schemes.items():
        if name == full or loss(name, train_length) is None or loss(name, longest) is None:
            continue
        near, far = loss(name, train_length) - loss(full, train_length), loss(name, longest) - loss(full, longest)
        at_train = ("matches it (within 0.01)" if abs(near) <= 0.01 else
                    f"beats it by {-near:.3f}" if near < 0 else f"trails it by {near:.3f}")
        at_longest = ("the same as it (within 0.01)" if abs(far) <= 0.01 else
                      f"{-far:.3f} below it" if far < 0 else f"{far:.3f} above it")
        lines.append(f"- **{scheme.label}** ({scheme.hint}): {loss(name, train_length):.3f} at {train_length} tokens, "
                     f"so it {at_train}; {loss(name, longest):.3f} at {longest:,}, {at_longest}."
                     + (f" {scheme.finding}." if scheme.finding else ""))
    return "" if not lines else (f"Against **{schemes[full].label}** ({loss(full, train_length):.3f} at {train_length}, "
            f"{loss(full, longest):.3f} at {longest:,}), trained the same way:\n" + "\n".join(lines))


def worst_curve_sentence(tables: dict[str, dict[int, dict]], *, train_length: int, unigram: float | None) -> str:
    """Markdown: what the steepest curve does at the longest length measured, against the training length
    and the unigram baseline (word frequencies alone), and which curves stop; "" when none goes past."""
    longest = max((length for t in tables.values() for length, e in t.items() if e.get("loss") is not None),
                  default=train_length)
    change = {name: t[longest]["loss"] - t[train_length]["loss"] for name, t in tables.items()
              if t.get(train_length, {}).get("loss") is not None and t.get(longest, {}).get("loss") is not None}
    stops = sorted(name for name, t in tables.items() if any(e.get("loss") is None for e in t.values()))
    said = []
    if longest > train_length and change:
        worst = max(change, key=change.get)
        at = f"at {longest} tokens ({longest / train_length:g}× the training length of {train_length})"
        if change[worst] <= 0:
            said.append(f"No curve climbs: {at} every model's loss is at or below its loss at {train_length}.")
        else:
            said.append(f"The steepest curve, **{worst}**, is **{change[worst]:+.2f}** nats {at}.")
            loss = tables[worst][longest]["loss"]
            if unigram is not None:
                said.append(f"That is worse, but at {loss:.2f} it is still **{unigram - loss:.2f}** nats better than "
                            f"the unigram baseline ({unigram:.2f}, word frequencies alone): it has not fallen apart."
                            if loss < unigram else
                            f"At {loss:.2f} it is no better than the unigram baseline ({unigram:.2f}, word "
                            "frequencies alone): past the training length it has lost what it learned.")
    if stops:
        said.append(f"{' and '.join(f'**{name}**' for name in stops)} cannot run that far at all: "
                    f"{'its table ends' if len(stops) == 1 else 'their tables end'} (the × on {'its' if len(stops) == 1 else 'each'} line).")
    return " ".join(said)


def curve_caption(curve: LossCurve, model: GPT, *, train_length: int) -> str:
    """What the loss-along-the-text figure draws: its two lines, the gaps of tokens the model cannot predict,
    and, by what the text reaches, the sliding-window line past the training length or where a table stops."""
    outside = curve.outside_vocabulary
    said = (f"Faint: the loss of each token; dark: the mean of the last {curve.window}."
            + (f" The {outside:,} {'gaps are tokens' if outside > 1 else 'gap is a token'} the model cannot predict: "
               "its softmax covers only the "
               f"{output_count(model):,} tokens it saw in training." if outside else ""))
    wall = (f"The red line is where this model's table ends ({curve.wall:,} rows): the tokens past it cannot be "
            "scored." if curve.wall is not None else "")
    if len(curve.losses) > train_length:
        edge = " ".join(filter(None, (
            "Past the dashed training length, compare the dark line with the dotted one: the same tokens, "
            f"{sliding_sentence(train_length, rows=window_rows(model, train_length))}. Both lines give every token at least {train_length - 1:,} tokens of "
            "context; only the dark one reads past the training length.", wall)))
    elif wall:
        edge = wall
    else:
        edge = (f"No prediction here reads more than this model's training length ({train_length:,} tokens): every "
                "token is read within what it was trained on, so no line marks the edge.")
    return said + "\n\n" + edge
