"""Snapshots taken while a model trains: what the Training timeline page replays.

At about 16 log-spaced steps (0, 25, ..., the last) training records, from the model as it is:
the validation loss on a fixed slice of held-out TinyStories text; the position rows (the learned
table itself, or for the other schemes what the first block writes that depends on position);
the nearest tokens of ~40 probe words; the first layer's attention on a probe sentence; and the
cosine between the summed rows of a word repeated in that sentence; and for a scheme with a learned
bias on the scores (t5, fire), the first layer's bias at a few query positions. Everything is float16 or
small integers, so a model's whole timeline stays well under 1 MB inside its checkpoint's meta,
read back with the same `torch.load(weights_only=True)` as the weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lpos.model import GPT
from lpos.tokenizer import GPT2, Tokenizer

SNAPSHOT_COUNT = 16
FIRST_SNAPSHOT = 25  # the first step after 0; the rest are spaced evenly in log(step)
EVAL_WINDOWS = 32  # windows of block_size held-out tokens scored at each snapshot
NEIGHBOURS = 8
PROBE_SENTENCE = "Once upon a time, a little girl named Lily saw a cat. The cat was happy, and Lily played with the cat."
REPEATED_WORD = " cat"
BIAS_QUERIES = (15, 63, 127)  # query positions whose bias rows a snapshot keeps (FIRE's depends on them)
PROBE_WORDS = (
    " cat", " dog", " bird", " fish", " ball", " tree", " park", " house", " car", " toy",
    " mom", " dad", " girl", " boy", " king", " queen", " friend", " happy", " sad", " big",
    " little", " red", " blue", " good", " bad", " ran", " jumped", " said", " played", " saw",
    " went", " smiled", " one", " two", " three", " day", " night", " sun", " water", " apple",
)


@dataclass(frozen=True)
class Probe:
    """What a snapshot reads the model on: a sentence holding a repeated token, and words (one token each)
    whose nearest tokens it keeps, all in the model's own tokenizer."""
    sentence: str
    repeated: str  # a token that occurs in `sentence` more than once
    words: tuple[str, ...]
    tokenizer: Tokenizer

    def ids(self) -> list[int]:
        """Ids of the probe words that are one token each."""
        return [ids[0] for ids in map(self.tokenizer.encode, self.words) if len(ids) == 1]


STORY_PROBE = Probe(PROBE_SENTENCE, REPEATED_WORD, PROBE_WORDS, GPT2)  # the shipped models' (GPT-2 tokens)


def snapshot_steps(total: int, *, count: int = SNAPSHOT_COUNT, first: int = FIRST_SNAPSHOT) -> list[int]:
    """0, then `count - 1` steps evenly spaced in log from `first` to `total` (fewer if they collide)."""
    if total <= first:
        return sorted({0, total})
    ratio = math.log(total / first) / (count - 2)
    steps = {0, total} | {round(first * math.exp(ratio * i)) for i in range(count - 1)}
    return sorted(steps)


def probe_ids() -> list[int]:
    """Ids of the probe words that are one GPT-2 token each (all of PROBE_WORDS are)."""
    return STORY_PROBE.ids()


def eval_windows(stream: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first EVAL_WINDOWS non-overlapping windows of `stream`: inputs and targets (n, T)."""
    n = min(EVAL_WINDOWS, (len(stream) - 1) // block_size)
    x = torch.stack([stream[i * block_size : (i + 1) * block_size] for i in range(n)])
    y = torch.stack([stream[i * block_size + 1 : (i + 1) * block_size + 1] for i in range(n)])
    return x, y


@torch.no_grad()
def position_rows(model: GPT, x: torch.Tensor) -> tuple[str, torch.Tensor]:
    """(kind, rows (T, C)): the table's rows a window of T tokens reads (the whole table of a shipped
    learned model; a randomized table's evaluation positions), or the first block's mean output at each
    position over the windows `x`, minus its mean over positions (what block 1 adds that depends on where)."""
    if model.scheme.has_table:
        positions = model.scheme.input_positions(model.config, x.shape[1], 0)
        return "table", model.scheme.position_rows(model, positions).detach().clone()
    block = model.transformer.h[0]
    h = model.embed_parts(x).total
    out, _ = block(h)
    signal = (out - h).mean(dim=0)  # (T, C) what block 1 writes, averaged over windows
    return "block1", signal - signal.mean(dim=0, keepdim=True)


@torch.no_grad()
def nearest(model: GPT, ids: list[int], *, k: int = NEIGHBOURS) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest tokens (cosine of token rows, inside the model's vocabulary) of each id."""
    table = F.normalize(model.transformer.wte.weight.detach(), dim=-1)  # (V, C)
    vocab = model.output_vocab if model.output_vocab is not None else torch.arange(table.shape[0])
    cos = table[ids] @ table[vocab].T  # (W, V')
    cos[vocab[None, :] == torch.tensor(ids)[:, None]] = -2.0  # a word is not its own neighbour
    top = cos.topk(k, dim=-1)
    return vocab[top.indices].int(), top.values.half()


@torch.no_grad()
def bias_rows(model: GPT) -> tuple[list[int], torch.Tensor] | None:
    """(queries, bias (nh, Q, block_size)): the first layer's bias on the scores of queries at BIAS_QUERIES
    (those inside the block) against every key; keys after a query are never read. None for a scheme
    without a learned bias (ALiBi's is fixed: the same at every step)."""
    if not model.scheme.shows("bias") or not model.scheme.parameter_count(model.config):
        return None
    block = model.config.block_size
    queries = [q for q in BIAS_QUERIES if q < block] or [block - 1]
    bias = model.scheme.bias(model.transformer.h[0].attn, 0, block, block)  # (nh, T, S)
    return queries, bias[:, queries].detach().clone()


@torch.no_grad()
def take(model: GPT, step: int, x: torch.Tensor, y: torch.Tensor, *, probe: Probe = STORY_PROBE) -> dict:
    """One snapshot of `model` at `step` (it is put back in the mode it was in)."""
    was_training = model.training
    model.eval()
    sentence = torch.tensor([probe.tokenizer.encode(probe.sentence)[: model.config.block_size]])
    _, _, attention = model(sentence, return_attention=True)
    total = F.normalize(model.embed_parts(sentence).total[0], dim=-1)  # (T, C)
    where = [i for i, t in enumerate(sentence[0].tolist()) if t == probe.tokenizer.encode(probe.repeated)[0]]
    kind, rows = position_rows(model, x)
    neighbours, neighbour_cos = nearest(model, probe.ids())
    snapshot = {
        "step": step,
        "val_loss": round(float(model.vocab_loss(x, y)), 4),
        "position_kind": kind,
        "position_rows": rows.half(),
        "neighbours": neighbours,
        "neighbour_cos": neighbour_cos,
        "attention": attention[0][0].half(),  # (nh, T, T) first layer, probe sentence
        "repeated_cos": (total[where] @ total[where].T).half(),  # (n, n) between the repeats
    }
    learned_bias = bias_rows(model)
    if learned_bias is not None:
        snapshot["bias_queries"], snapshot["bias"] = learned_bias[0], learned_bias[1].half()
    model.train(was_training)
    return snapshot


def timeline(snapshots: list[dict], eval_tokens: int, *, probe: Probe = STORY_PROBE) -> dict:
    """Stack snapshots into the dict stored as meta["timeline"]."""
    stack = lambda key: torch.stack([s[key] for s in snapshots])  # noqa: E731
    return {
        "steps": [s["step"] for s in snapshots],
        "val_loss": [s["val_loss"] for s in snapshots],
        "eval_tokens": eval_tokens,
        "position_kind": snapshots[0]["position_kind"],
        "position_rows": stack("position_rows"),  # (S, T, C) float16
        "probe_words": [w.strip() for w in probe.words],
        "probe_ids": probe.ids(),
        "neighbours": stack("neighbours"),  # (S, W, k) int32
        "neighbour_cos": stack("neighbour_cos"),  # (S, W, k) float16
        "probe_sentence": probe.sentence,
        "attention": stack("attention"),  # (S, nh, T, T) float16
        "repeated_word": probe.repeated.strip(),
        "repeated_cos": stack("repeated_cos"),  # (S, n, n) float16
    } | ({"bias_queries": snapshots[0]["bias_queries"], "bias": stack("bias")}  # (S, nh, Q, T) float16
         if all("bias" in s for s in snapshots) else {})
