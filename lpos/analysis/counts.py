"""Contextual positions (the "contextual" view: CoPE): what each head counts.

A CoPE head gives key j, seen from query i, the position p_ij = the sum of its gates on keys j..i, so
a head whose gates open on every token counts tokens, one whose gates open on word starts counts
words. The counts come from the model's own steps: q and k from `attn.project`, the masked scores
without the score term from `attn.scores(q, k, scheme=NO_POSITIONS)`, and `lpos.positions.cope.counts`, the
function the scheme itself adds its term with.

What a head counts is measured: from the last token back, the correlation of its count with the
number of tokens, of word starts and of full stops from each key to the end, on the sidebar's text
and on the built-in story (cut into windows, each read alone from position 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.analysis.attention import check_layer, queries_and_keys
from lpos.model import GPT
from lpos.positions import NO_POSITIONS
from lpos.positions.cope import counts as gated_counts

STORY_WINDOW = 128  # tokens per story window: the shipped models' training length
UNITS = ("tokens", "words", "sentences")  # what a head's count is compared with
SENTENCE_ENDS = ".!?"
JOINERS = "'’-"  # a letter after these continues a word ("don't", "well-known")


@dataclass(frozen=True)
class ContextualCounts:
    layer: int
    from_last: np.ndarray  # (nh, T): key j's position as the last token counts it, p_{T-1, j}
    running: np.ndarray  # (nh, T): the whole text's count up to token i, p_{i, 0}
    npos_max: int  # counts stop at npos_max - 1 (the last row of the layer's count table)


def check_contextual(model: GPT) -> None:
    if not model.scheme.shows("contextual"):
        raise ValueError(f"{model.scheme.label} counts no contextual positions: it {model.scheme.acts}")


@torch.no_grad()
def count_matrix(model: GPT, ids: list[int], *, layer: int) -> torch.Tensor:
    """Every query's count of every key, (nh, T, T): row = query i, column = key j (0 after i)."""
    check_layer(model, layer)
    check_contextual(model)
    q, k = queries_and_keys(model, ids, layer=layer, rotate=True)  # (nh, T, hs) as the layer reads them
    scores = model.transformer.h[layer].attn.scores(q[None], k[None], scheme=NO_POSITIONS)[0]  # (nh, T, T) masked
    return gated_counts(scores, model.config.npos_max)


def contextual_counts(model: GPT, ids: list[int], *, layer: int) -> ContextualCounts:
    p = count_matrix(model, ids, layer=layer)  # (nh, T, T)
    return ContextualCounts(layer=layer, from_last=p[:, -1].numpy(), running=p[:, :, 0].numpy(),
                            npos_max=model.config.npos_max)


def count_heatmap_sentence(found: ContextualCounts) -> str:
    """What the heatmap of every head's count from the last token shows, and where counts stop."""
    return (f"Row = head, column = an earlier token; the colour is that token's position as the last token counts "
            f"it: the sum of the head's gates (each between 0 and 1) from that token to the last. Counts stop at "
            f"{found.npos_max - 1}, the last row of the layer's count table.")


def word_starts(tokens: list[str]) -> np.ndarray:
    """(T,) bool: the token holds a letter or digit that begins a word (nothing word-like before it)."""
    flags, before = [], ""
    for token in tokens:
        start = False
        for index, character in enumerate(token):
            if character.isalnum():
                previous = token[index - 1] if index else before
                start = not previous or not (previous.isalnum() or previous in JOINERS)
                break
        flags.append(start)
        before = token[-1:] or before
    return np.array(flags, dtype=bool)


def sentence_ends(tokens: list[str]) -> np.ndarray:
    """(T,) bool: the token holds a full stop, question mark or exclamation mark."""
    return np.array([any(c in SENTENCE_ENDS for c in token) for token in tokens], dtype=bool)


def units_back(tokens: list[str]) -> dict[str, np.ndarray]:
    """For each key j, how many tokens, word starts and sentence ends lie in j..T-1 (the last token
    included): what a head's count from the last token would be if its gate opened on exactly those."""
    def from_the_end(flags: np.ndarray) -> np.ndarray:
        return flags[::-1].cumsum()[::-1].astype(float)

    ones = np.ones(len(tokens), dtype=bool)
    return dict(zip(UNITS, (from_the_end(ones), from_the_end(word_starts(tokens)), from_the_end(sentence_ends(tokens)))))


def units_so_far(tokens: list[str]) -> dict[str, np.ndarray]:
    """For each token i, how many tokens, word starts and sentence ends lie in 0..i: the running
    count a head would give if its gate opened on exactly those."""
    ones = np.ones(len(tokens), dtype=bool)
    return dict(zip(UNITS, (flags.cumsum().astype(float) for flags in (ones, word_starts(tokens), sentence_ends(tokens)))))


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r; NaN when either side is constant (nothing to follow) or has under 3 values."""
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def correlation_rows(counts: list[np.ndarray], tokens: list[list[str]]) -> pd.DataFrame:
    """Per head: counts (nh, T) from the last token of each text, pooled over the texts; the count per
    token (whole text's count / its tokens) and r against each unit."""
    backs = [units_back(t) for t in tokens]
    pooled = np.concatenate(counts, axis=1)  # (nh, sum T)
    rows = []
    for head in range(pooled.shape[0]):
        row = {"head": head + 1, "per token": float(np.mean([c[head, 0] / c.shape[1] for c in counts]))}
        for unit in UNITS:
            row[unit] = correlation(pooled[head], np.concatenate([b[unit] for b in backs]))
        rows.append(row)
    return pd.DataFrame(rows)


def windows(ids: list[int], tokens: list[str], *, window: int) -> list[tuple[list[int], list[str]]]:
    """A text cut into consecutive windows of `window` tokens, as (ids, token strings); all of it when
    shorter; a last, partial window left out."""
    starts = range(0, max(len(ids) - window, 0) + 1, window)
    return [(list(ids[s:s + window]), list(tokens[s:s + window])) for s in starts]


@dataclass(frozen=True)
class CountSummary:
    table: pd.DataFrame  # text ("sentence" | "story"), head, per token, tokens, words, sentences (r values)
    window: int  # tokens per story window
    windows: int  # story windows read


def count_table(model: GPT, *, layer: int, sentence: tuple[list[int], list[str]],
                story: tuple[list[int], list[str]]) -> CountSummary:
    """What each head's count follows. `sentence` and `story` are (ids, token strings); the story is
    read in windows of STORY_WINDOW tokens (fewer if the count table is shorter), each alone from
    position 0, its windows pooled."""
    window = min(STORY_WINDOW, model.config.npos_max)
    story_parts = windows(*story, window=window)
    parts = []
    for name, texts in (("sentence", [sentence]), ("story", story_parts)):
        counts = [contextual_counts(model, ids, layer=layer).from_last for ids, _ in texts]
        parts.append(correlation_rows(counts, [tokens for _, tokens in texts]).assign(text=name))
    table = pd.concat(parts, ignore_index=True)[["text", "head", "per token", *UNITS]]
    return CountSummary(table=table, window=window, windows=len(story_parts))


def listed(items: list[str] | tuple[str, ...], conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c" (or "a, b or c")."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


def heads_named(heads: list[int]) -> str:
    """"head 2", "heads 1, 2 and 4" (heads count from 1, as the tables do)."""
    return f"{'head' if len(heads) == 1 else 'heads'} {listed([str(h) for h in heads])}"


def numbers(values: list[float], *, unit: str = "") -> str:
    """Values to two decimals, listed; one value "each" when they all round alike."""
    shown = [f"{v:.2f}" for v in values]
    if len(set(shown)) == 1:
        return shown[0] + unit + (" each" if len(shown) > 1 else "")
    return listed(shown) + unit


def count_sentence(summary: CountSummary, *, text: str = "story") -> str:
    """What the heads' counts follow best on one text of the summary, grouped by unit, and how much
    each head counts per token."""
    rows = summary.table[summary.table["text"] == text].to_dict("records")
    best: dict[str, list[tuple[int, float]]] = {}
    flat = []
    for row in rows:
        measured = {unit: row[unit] for unit in UNITS if not np.isnan(row[unit])}
        if measured:
            unit = max(measured, key=measured.get)
            best.setdefault(unit, []).append((row["head"], measured[unit]))
        else:
            flat.append(row["head"])
    clauses = [f"{heads_named([h for h, _ in found])} follow{'s' if len(found) == 1 else ''} {unit} best "
               f"(r = {numbers([r for _, r in found])})" for unit, found in best.items()]
    if flat:
        clauses.append(f"{heads_named(flat)} cannot be compared (too few tokens, or a count that never changes)")
    return (listed(clauses) + f"; {heads_named([r['head'] for r in rows])} count "
            f"{numbers([r['per token'] for r in rows], unit=' per token')}.")


def count_table_sentence(summary: CountSummary, *, layer: int, trained: bool) -> str:
    """What the count table measures, and what the heads follow on the story and on the sidebar's text."""
    untrained = " Untrained: the gates have not learned what to count yet." if not trained else ""
    return (f"Correlation (r) of each head's count from the last token back with the number of tokens, words and "
            f"sentence ends back; per token: the whole text's count divided by its tokens. Layer {layer + 1}, "
            f"measured now.\nOn the built-in story ({summary.windows} windows of {summary.window} tokens, each "
            f"read alone): {count_sentence(summary, text='story')} On your text: "
            f"{count_sentence(summary, text='sentence')}{untrained}")
