"""The order-blindness experiment: permute every token but the last and see what changes.

Without positions, the last position's first-layer attention output is a softmax-weighted
average over the (key, value) pairs of all tokens, and a permutation of the earlier tokens only
reorders that sum: the output is identical up to float error. Every other scheme ties a key to
its position, so it changes. From layer 2 on, even `none` changes, because each earlier position
attended over its own prefix: the causal mask leaks order.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.model import GPT
from lpos.positions import scheme_info
from lpos.tokenizer import GPT2, Tokenizer, visible

ORDER_BLIND_TOLERANCE = 1e-5  # float32 reordering of a sum moves it by ~1e-7; a trained position signal moves it more
EXACT_TOLERANCE = 1e-12  # in float64 reordering a sum moves it by ~1e-17: a change above this is the positions'


def can_shuffle(ids: list[int]) -> bool:
    """True when permuting the earlier tokens can change their order (two different ones)."""
    return len(set(ids[:-1])) >= 2


def shuffle_earlier(ids: list[int], *, seed: int = 0) -> list[int]:
    """Permute all tokens but the last; when possible the order of tokens really changes."""
    earlier, last = list(ids[:-1]), list(ids[-1:])
    if not can_shuffle(ids):
        return list(ids)
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(earlier), generator=generator).tolist()
        shuffled = [earlier[i] for i in order]
        if shuffled != earlier:
            return shuffled + last


def moved_from(original: list[int], shuffled: list[int]) -> list[int]:
    """For each position of `shuffled`, the position in `original` its token came from.

    A token that occurs twice is matched first to first: two copies of one id have the same
    row, so which copy went where cannot matter to a model without positions.
    """
    if sorted(original) != sorted(shuffled):
        raise ValueError("the shuffled ids are not a permutation of the original ids")
    unused: dict[int, list[int]] = {}
    for position, token_id in enumerate(original):
        unused.setdefault(token_id, []).append(position)
    return [unused[token_id].pop(0) for token_id in shuffled]


@torch.no_grad()
def first_layer_attention(model: GPT, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The last position's first-layer attention output (C,) and its weights (n_head, T)."""
    x = model.embed_parts(torch.tensor([ids], dtype=torch.long)).total  # (1, T, C)
    block = model.transformer.h[0]
    output, weights = block.attn(block.ln_1(x))  # (1, T, C), (1, nh, T, T)
    return output[0, -1].numpy(), weights[0, :, -1, :].numpy()


@torch.no_grad()
def exact_first_layer_change(model: GPT, ids: list[int], shuffled: list[int]) -> float:
    """first_layer_attention's change between the two orders, its first block recomputed in float64: what
    the reordered sum alone moves is ~1e-17 there, so a change above EXACT_TOLERANCE comes from positions,
    however small (an untrained FIRE's bias starts near 0, not at 0)."""
    # the block's own weights copied in float64; what its attention reads of the model (model_parts: T5's shared
    # bias table) is shared, not copied with it (the token table alone is 50,257 rows)
    block = copy.deepcopy(model.transformer.h[0], memo={id(model.transformer): model.transformer}).double()
    changes = []
    for order in (ids, shuffled):
        x = model.embed_parts(torch.tensor([order], dtype=torch.long)).total.double()  # (1, T, C)
        changes.append(block.attn(block.ln_1(x))[0][0, -1])  # (C,)
    return float((changes[1] - changes[0]).abs().max())


@dataclass(frozen=True)
class ShuffleResult:
    scheme: str
    original: list[int]
    shuffled: list[int]
    attention_change: float  # max |change| of the last position's first-layer attention output
    logits_change: float  # max |change| of the full model's last-position logits
    weights_before: np.ndarray  # (n_head, T) first-layer weights of the last position
    weights_after: np.ndarray  # (n_head, T), columns in the shuffled order
    top_before: pd.DataFrame  # top-5 next tokens and probabilities
    top_after: pd.DataFrame
    distribution_change: float  # total variation between the last position's next-token distributions
    exact_change: float  # attention_change recomputed in float64 (exact_first_layer_change)

    @property
    def same_top1(self) -> bool:
        return self.top_before["token"].iloc[0] == self.top_after["token"].iloc[0]

    @property
    def order_blind(self) -> bool:
        """Layer 1's output at the last token did not move beyond rounding, measured in float64."""
        return self.exact_change < EXACT_TOLERANCE


@torch.no_grad()
def last_logits(model: GPT, orders: list[list[int]]) -> torch.Tensor:
    """The last position's logits (B, vocab) of equally long inputs, run as one batch: the head runs on
    that one row of each, not on all T."""
    hidden, _ = model.hidden_states(torch.tensor(orders, dtype=torch.long), keep_attention=False)  # (B, T, C)
    return model.output_logits(hidden[:, -1])


def top_predictions(logits: torch.Tensor, *, k: int = 5, tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    """The k likeliest next tokens of one position's logits (vocab,), among the tokenizer's tokens (never a
    padding row)."""
    probabilities = torch.softmax(logits, dim=-1)[: tokenizer.vocab_size]  # (V,)
    top = torch.topk(probabilities, min(k, len(probabilities)))
    return pd.DataFrame(
        {"token": [visible(t) for t in tokenizer.token_strings(top.indices.tolist())], "probability": top.values.numpy()}
    )


@torch.no_grad()
def shuffle_experiment(model: GPT, ids: list[int], *, seed: int = 0, shuffled: list[int] | None = None,
                       tokenizer: Tokenizer = GPT2) -> ShuffleResult:
    if len(ids) < 2:
        raise ValueError("the shuffle experiment needs at least two tokens")
    shuffled = shuffled if shuffled is not None else shuffle_earlier(ids, seed=seed)
    if shuffled[-1] != ids[-1] or sorted(shuffled) != sorted(ids):
        raise ValueError("the shuffled ids must permute the earlier tokens and keep the last one")
    out_before, weights_before = first_layer_attention(model, ids)
    out_after, weights_after = first_layer_attention(model, shuffled)
    before, after = last_logits(model, [ids, shuffled])  # (vocab,) each
    finite = torch.isfinite(before)  # tokens outside a corpus vocabulary are -inf
    return ShuffleResult(
        scheme=model.config.position,
        original=list(ids),
        shuffled=shuffled,
        attention_change=float(np.abs(out_after - out_before).max()),
        logits_change=float((after - before)[finite].abs().max()),
        weights_before=weights_before,
        weights_after=weights_after,
        top_before=top_predictions(before, tokenizer=tokenizer),
        top_after=top_predictions(after, tokenizer=tokenizer),
        distribution_change=float(0.5 * (torch.softmax(after, -1) - torch.softmax(before, -1)).abs().sum()),
        exact_change=exact_first_layer_change(model, ids, shuffled),
    )


def token_by_token(original: list[int], shuffled: list[int], *, tokenizer: Tokenizer = GPT2) -> str:
    """The shuffled tokens one by one, split by │, each with its label from the original text (a byte piece
    keeps its character): decoded, a shuffle glues tokens together (“bit the manThe dog”, “17 51 7”)."""
    labels = [visible(t) for t in tokenizer.token_strings(original)]
    return " │ ".join(labels[i] for i in moved_from(original, shuffled))


def _quoted(ids: list[int], *, limit: int = 80, tokenizer: Tokenizer = GPT2) -> str:
    text = " ".join(tokenizer.decode(ids).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gives_positions(scheme: str) -> bool:
    """Whether a scheme gives the model positions at all: rows added to the input, or something in attention."""
    info = scheme_info(scheme)
    return info.adds_rows or info.in_attention


def order_blind_sentence(result: ShuffleResult, *, literal=lambda text: text, tokenizer: Tokenizer = GPT2) -> str:
    """What the first layer did with the two orders actually drawn, named by their text (`literal`
    escapes it for Markdown) in `tokenizer`: the sentence and its shuffle share their last token by construction."""
    last = visible(tokenizer.token_strings(result.original[-1:])[0])
    before, after = _quoted(result.original, tokenizer=tokenizer), _quoted(result.shuffled, tokenizer=tokenizer)
    pair = (f"“{literal(before)}” and its shuffle “{literal(after)}” "
            f"(both end in “{literal(last)}”)")
    verdict = ("more than float rounding: this model's first layer tells the two orders apart"
               if not result.order_blind and result.attention_change >= ORDER_BLIND_TOLERANCE
               else (f"small, yet more than float rounding (recomputed in float64 it moves by {result.exact_change:.1e}, "
                     f"where reordering alone moves it by under {EXACT_TOLERANCE:g}): this model's first layer tells the "
                     "two orders apart, if barely") if not result.order_blind
               else "float rounding: the first layer cannot tell the two orders apart" if not gives_positions(result.scheme)
               else (f"float rounding (recomputed in float64: {result.exact_change:.1e}), although {result.scheme} does "
                     "give positions: with this model's weights they leave layer 1's output unchanged"))
    return (f"{pair}: under {result.scheme}, layer 1's output for the last token moved by at most "
            f"{result.attention_change:.1e}, {verdict}.")


def shuffle_table(results: list[ShuffleResult], *, labels: list[str] | None = None) -> pd.DataFrame:
    """One row per scheme: how much the first layer and the whole model moved.

    `labels` names the model behind each row (a column is added when given).
    """
    table = pd.DataFrame(
        {
            "scheme": [r.scheme for r in results],
            "layer-1 attention output, max |change|": [r.attention_change for r in results],
            "order-blind at layer 1": [r.order_blind for r in results],
            "full-model logits, max |change|": [r.logits_change for r in results],
        }
    )
    if labels is not None:
        table.insert(1, "model", labels)
    return table


def _percent(probability: float) -> str:
    return f"{probability:.1%}" if probability >= 0.001 else f"{probability:.0e}"


def _ranked(top: pd.DataFrame) -> str:
    """“␣and” 20.3% · “.” 13.0% · …: each token quoted, so a punctuation token reads apart from its share."""
    return " · ".join(f"“{token}” {_percent(p)}" for token, p in zip(top["token"], top["probability"]))


def top1_table(results: list[ShuffleResult]) -> pd.DataFrame:
    """One short row per scheme, narrow enough for a phone: the full model's likeliest next token before and
    after the shuffle, whether it stayed, and how far the whole distribution moved, as the three digits it
    was rounded to (predictions_table has the top 5)."""
    return pd.DataFrame(
        {
            "scheme": [r.scheme for r in results],
            "next token, original order": [_ranked(r.top_before.head(1)) for r in results],
            "next token, shuffled": [_ranked(r.top_after.head(1)) for r in results],
            "same top-1": ["yes" if r.same_top1 else "no" for r in results],
            "distribution moved (total variation)": [f"{r.distribution_change:.3f}" for r in results],
        }
    )


def predictions_table(results: list[ShuffleResult]) -> pd.DataFrame:
    """One row per scheme: the full model's top-5 next tokens before and after the shuffle."""
    return pd.DataFrame(
        {
            "scheme": [r.scheme for r in results],
            "top-5 next tokens, original order": [_ranked(r.top_before) for r in results],
            "top-5 next tokens, shuffled": [_ranked(r.top_after) for r in results],
            "same top-1": [r.same_top1 for r in results],
            "distribution moved (total variation)": [round(r.distribution_change, 3) for r in results],
        }
    )
