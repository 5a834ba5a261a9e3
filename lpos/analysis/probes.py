"""Where position lives: linear probes on every residual stream of a model.

For each stream (the input to block 1, then the output of every block) a ridge regression in
closed form predicts, from a token's hidden vector alone, (a) its absolute position in the window
and (b) a relative quantity: how many tokens back the last sentence end (. ! ? or a newline) was.
Probes are fitted on some windows of held-out text, their penalty is picked on other windows, and
they are scored on windows neither saw (Haviv et al. 2022 probe position the same way). The
reading at the end turns the scores into sentences, so the app never states what it did not measure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from lpos import corpus
from lpos.analysis.counts import listed
from lpos.model import GPT
from lpos.positions import REGISTRY, PositionScheme
from lpos.tokenizer import END_OF_TEXT_ID, GPT2, Tokenizer, decode

WINDOW = 128  # tokens per probe window: the shipped models' training length
PENALTIES = tuple(10.0 ** k for k in range(-6, 3))  # ridge penalties, as multiples of the mean eigenvalue of XᵀX
FEATURE_BUDGET = 16_000_000  # floats of hidden states held at once (64 MB): caps tokens for wide, deep uploads
SENTENCE_ENDS = (".", "!", "?", "\n")
HELD_OUT_TOKENS = 24 * WINDOW  # of the eval stream (24 windows), beside the built-in story (10 windows)


@dataclass(frozen=True)
class ProbeText:
    windows: torch.Tensor  # (n, L) token ids, non-overlapping windows of the texts
    split: torch.Tensor  # (n,) 0 = fit, 1 = pick the penalty, 2 = score
    sources: str  # what the text is, for captions


def held_out_stream(meta: dict) -> list[int]:
    """The first HELD_OUT_TOKENS of a checkpoint's held-out stories (the stream its card's loss by
    length is measured on, never trained on); [] when its corpus files are not on this machine."""
    stream = corpus.held_out_stream(meta, tokens=HELD_OUT_TOKENS)
    return [] if stream is None else stream.tolist()


def story_ids(*, tokenizer: Tokenizer = GPT2) -> list[int]:
    """The built-in story in `tokenizer`'s tokens, the characters its vocabulary lacks left out: the text
    the Inside page reads first."""
    return tokenizer.encode_known(corpus.story())[0]


def held_out_ids(meta: dict, *, tokenizer: Tokenizer = GPT2) -> list[int]:
    """held_out_stream(meta) in `tokenizer`'s tokens: GPT-2's ids as they are, another's from their text."""
    ids = held_out_stream(meta)
    return ids if tokenizer.is_gpt2 else tokenizer.encode_known(decode(ids))[0]


def probe_text(texts: dict[str, list[int]], *, model: GPT, window: int = WINDOW) -> ProbeText:
    """Non-overlapping windows of each text, interleaved into fit / penalty / score windows (2:1:1).

    The window is the model's block size when that is shorter; wide, deep models get fewer windows
    (FEATURE_BUDGET), and every split keeps at least one window.
    """
    config = model.config
    length = min(window, config.block_size)
    rows = [torch.tensor(ids[i : i + length]) for ids in texts.values() for i in range(0, len(ids) - length + 1, length)]
    affordable = max(4, FEATURE_BUDGET // (length * config.n_embd * (config.n_layer + 1)))
    rows = rows[:affordable]
    if len(rows) < 4:
        raise ValueError(f"a probe needs at least 4 windows of {length} tokens (fit, penalty, score); this text "
                         f"has {len(rows)}. Use a longer text.")
    if max(int(r.max()) for r in rows) >= config.vocab_size:
        raise ValueError(f"this model's vocabulary has {config.vocab_size:,} tokens, fewer than GPT-2's: it cannot "
                         "read this text")
    split = torch.tensor([(0, 0, 1, 2)[i % 4] for i in range(len(rows))])
    counts = ", ".join(f"{name} ({len(ids):,} tokens)" for name, ids in texts.items())
    return ProbeText(torch.stack(rows), split, counts)


@torch.no_grad()
def residual_streams(model: GPT, idx: torch.Tensor, *, keep_attention: bool = False,
                     batch_size: int = 16) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every residual stream for windows `idx` (n, L): n_layer + 1 tensors (n, L, C), the block
    input first; and, with keep_attention, each layer's weights (n, nh, L, L). `batch_size`
    windows run at a time."""
    traces = [model.trace(idx[first : first + batch_size], keep_attention=keep_attention, keep_residual=True)
              for first in range(0, len(idx), batch_size)]
    streams = [torch.cat(parts) for parts in zip(*(t.residual for t in traces))]  # each (n, L, C)
    weights = [torch.cat(parts) for parts in zip(*(t.attention for t in traces))]  # each (n, nh, L, L)
    return streams, weights


def sentence_distance(windows: torch.Tensor, *, tokenizer: Tokenizer = GPT2) -> torch.Tensor:
    """Tokens since the last sentence end before each token, inside its window (n, L); NaN where
    the window holds none before it. A story separator counts as an end."""
    unique = windows.unique().tolist()
    strings = dict(zip(unique, tokenizer.token_strings(unique)))
    separator = END_OF_TEXT_ID if tokenizer.is_gpt2 else None
    ends = {t for t, s in strings.items() if t == separator or any(e in s for e in SENTENCE_ENDS)}
    is_end = torch.isin(windows, torch.tensor(sorted(ends) or [-1]))  # (n, L)
    positions = torch.arange(windows.shape[1]).expand_as(windows)
    last = torch.where(is_end, positions, torch.full_like(positions, -1)).cummax(dim=1).values  # last end at or before
    before = torch.cat([torch.full_like(last[:, :1], -1), last[:, :-1]], dim=1)  # strictly before each token
    return torch.where(before >= 0, (positions - before).double(), torch.tensor(math.nan, dtype=torch.double))


def ridge_path(features: torch.Tensor, targets: torch.Tensor, *, penalties) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Closed-form ridge regression for several penalties at once: weights (C,) and bias () minimising
    |Xw + b - y|² + λ|w|², with λ = penalty × the mean eigenvalue of the centred XᵀX, so one penalty
    suits every layer's scale. One eigendecomposition of XᵀX serves every penalty."""
    mean_x, mean_y = features.mean(0), targets.mean()
    centred = features - mean_x  # (N, C)
    eigenvalues, vectors = torch.linalg.eigh(centred.T @ centred)  # (C,), (C, C)
    eigenvalues = eigenvalues.clamp(min=0)
    projected = vectors.T @ (centred.T @ (targets - mean_y))  # (C,)
    scale = max(float(eigenvalues.mean()), 1e-12)
    path = []
    for penalty in penalties:
        weights = vectors @ (projected / (eigenvalues + penalty * scale))
        path.append((weights, mean_y - mean_x @ weights))
    return path


def ridge(features: torch.Tensor, targets: torch.Tensor, *, penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Ridge regression with one penalty (see ridge_path)."""
    return ridge_path(features, targets, penalties=[penalty])[0]


def r_squared(predicted: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - residual / total sum of squares around the scored targets' own mean."""
    total = float(((targets - targets.mean()) ** 2).sum())
    return 1.0 - float(((targets - predicted) ** 2).sum()) / total if total > 0 else math.nan


def fit_probe(features: torch.Tensor, targets: torch.Tensor, split: torch.Tensor) -> dict:
    """Fit on split 0, pick the penalty on split 1, refit on both, score on split 2. Rows whose
    target is NaN are left out. `features` (N, C), `targets` (N,), `split` (N,)."""
    keep = ~targets.isnan()
    X, y, s = features[keep].double(), targets[keep].double(), split[keep]
    if min(int((s == part).sum()) for part in (0, 1, 2)) < 2:
        return {"r2": math.nan, "mae": math.nan, "penalty": math.nan, "fitted": int((s < 2).sum()), "scored": int((s == 2).sum())}
    fit, pick, score = s == 0, s == 1, s == 2
    errors = [float(((X[pick] @ w + b - y[pick]) ** 2).mean()) for w, b in ridge_path(X[fit], y[fit], penalties=PENALTIES)]
    penalty = PENALTIES[errors.index(min(errors))]
    w, b = ridge(X[~score], y[~score], penalty=penalty)
    predicted = X[score] @ w + b
    return {"r2": r_squared(predicted, y[score]), "mae": float((predicted - y[score]).abs().mean()),
            "penalty": penalty, "fitted": int((~score).sum()), "scored": int(score.sum())}


def stream_names(n_layer: int) -> list[str]:
    return ["input"] + [f"after block {i}" for i in range(1, n_layer + 1)]


def position_probes(model: GPT, text: ProbeText, *, tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    """One row per (stream, target): R² and mean absolute error (in tokens) on the scored windows,
    the penalty picked, and how many tokens were fitted on and scored."""
    streams, _ = residual_streams(model, text.windows)
    n, L = text.windows.shape
    targets = {"absolute position": torch.arange(L).double().repeat(n),
               "tokens since sentence end": sentence_distance(text.windows, tokenizer=tokenizer).reshape(-1)}
    split = text.split.repeat_interleave(L)
    rows = []
    for index, (name, stream) in enumerate(zip(stream_names(len(streams) - 1), streams)):
        features = stream.reshape(n * L, -1)  # (N, C)
        for target, values in targets.items():
            rows.append({"stream": index, "stream name": name, "target": target, "window": L,
                         **fit_probe(features, values, split)})
    return pd.DataFrame(rows)


def _scheme_of(name: str, schemes: dict[str, str] | None) -> PositionScheme | None:
    """The scheme of a model shown under `name`: from `schemes` (name -> scheme), else the registry's
    scheme of that name (a shipped model named after its scheme), else None."""
    scheme = (schemes or {}).get(name, name)
    return REGISTRY.get(scheme)


def _blind(scheme: PositionScheme | None) -> bool:
    """A scheme that gives the model no position at all: no rows, nothing in attention."""
    return scheme is not None and not scheme.adds_rows and not scheme.in_attention


def _attention_clause(schemes: list[PositionScheme | None]) -> str:
    """": RoPE, ALiBi hand attention ..." when every one of these schemes acts inside attention."""
    if not schemes or not all(s is not None and s.in_attention for s in schemes):
        return "."
    labels = list(dict.fromkeys(s.label for s in schemes))
    return (f": {listed(labels)} {'acts' if len(labels) == 1 else 'act'} inside attention, on the distance or the count between tokens, so nothing needs to "
            "write down where a token sits.")


def _series(frame: pd.DataFrame, target: str) -> pd.Series:
    return frame[frame.target == target].set_index("stream")["r2"]


def _r2(value: float) -> str:
    return f"{value:.2f}".replace("-0.00", "0.00")


def _listing(values: dict[str, float]) -> str:
    return ", ".join(f"{name} {_r2(value)}" for name, value in sorted(values.items(), key=lambda item: -item[1]))


def _no_signal(trained: dict[str, pd.DataFrame], names: list[str]) -> str:
    """", and the penalty search ... " when every layer of these models picked the strongest penalty searched:
    a probe that shrinks to the mean position, so no linear position signal in the range searched."""
    if not all("penalty" in trained[n] for n in names):
        return ""
    picked = [trained[n][trained[n].target == "absolute position"]["penalty"] for n in names]
    if not all(len(p) and (p == PENALTIES[-1]).all() for p in picked):
        return ""
    return (f"; the penalty search, from {PENALTIES[0]:.0e} to {PENALTIES[-1]:.0e} times the mean eigenvalue, picked "
            "the strongest at every layer, a probe that predicts the mean position: no linear position signal")


def probe_reading(trained: dict[str, pd.DataFrame], untrained: dict[str, pd.DataFrame], *,
                  schemes: dict[str, str] | None = None, limits: dict[str, int] | None = None) -> list[str]:
    """Sentences from the probe scores of trained models (by name) and untrained ones (by scheme), grouped by
    what the numbers show; `schemes` names each trained model's scheme where its name is not one; `limits`:
    the models whose table rows from that position on never trained (a short-window model)."""
    absolute = {n: _series(f, "absolute position") for n, f in trained.items()}
    absolute = {n: a for n, a in absolute.items() if not a.isna().all()}
    if not absolute:
        return ["No trained model to read: the probes of the untrained models are drawn alone."]
    relative = {n: _series(trained[n], "tokens since sentence end") for n in absolute}
    lines = []
    given = {n: a.iloc[0] for n, a in absolute.items() if a.iloc[0] >= 0.5}
    if given:
        lines.append(f"Position is in the stream from the start where the scheme adds it to the input (R² at the "
                     f"input: {_listing(given)}), and still there after the last block "
                     f"({_listing({n: absolute[n].iloc[-1] for n in given})}).")
    partly = {n: a for n, a in absolute.items() if 0.1 <= a.iloc[0] < 0.5}
    for n, a in partly.items():
        lines.append(f"In {n} a read-out finds position at the input only partly (R² {_r2(a.iloc[0])}); at its best "
                     f"layer {_r2(a.max())}, after the last block {_r2(a.iloc[-1])}.")
    first = next(iter(trained.values()))
    window = int(first["window"].iloc[0]) if "window" in first else None
    for n, limit in (limits or {}).items():
        if n in absolute and window is not None and limit < window:
            lines.append(f"{n} trained on windows of at most {limit} tokens: in these {window}-token windows the rows "
                         f"it adds at positions {limit}–{window - 1} never trained, so its probe mixes trained "
                         "and untrained rows.")
    blank = {n: a for n, a in absolute.items() if a.iloc[0] < 0.1}
    written = {n: a for n, a in blank.items() if a.max() >= 0.1}
    if written:
        lines.append(f"Where nothing is added to the input (R² at most {_r2(max(a.iloc[0] for a in written.values()))} "
                     f"there), the blocks of {listed(list(written))} write position into the stream; at their best "
                     f"layer: {_listing({n: a.max() for n, a in written.items()})}.")
    never = [n for n, a in blank.items() if a.max() < 0.1]
    if never:
        lines.append(f"{listed(never)} never {'hold' if len(never) > 1 else 'holds'} absolute position "
                     "linearly at any layer (best R² "
                     f"{_r2(max(blank[n].max() for n in never))})"
                     + _no_signal(trained, never)
                     + _attention_clause([_scheme_of(n, schemes) for n in never]))
    none = next((n for n in blank if _blind(_scheme_of(n, schemes))), None)
    fresh_name = next((n for n in untrained if _blind(_scheme_of(n, None))), None)
    fresh = _series(untrained[fresh_name], "absolute position") if fresh_name is not None else None
    if none is not None and fresh is not None:
        strength = "strongly" if absolute[none].max() >= 0.7 else "partly" if absolute[none].max() >= 0.2 else "barely"
        lines.append(f"`{none}` has no position scheme at all, yet a read-out finds R² {_r2(absolute[none].max())} at "
                     f"its best layer, against at most {_r2(fresh.max())} in the same model untrained: training taught "
                     f"it, {strength}, to count through the causal mask, as Haviv et al. (2022) found in larger models.")
    drops = {n: a.max() - a.iloc[-1] for n, a in absolute.items()}
    gains = {n: r.iloc[-1] - r.iloc[0] for n, r in relative.items() if not r.isna().all()}
    fading = [n for n, d in drops.items() if d > 0.1]
    if fading:
        lines.append(f"Absolute position fades by the last block in {listed(fading)} (down from its best by "
                     f"{_listing({n: drops[n] for n in fading})}).")
    else:
        lines.append(f"Absolute position does not fade with depth in any trained model (largest drop from its best "
                     f"layer to the last: {_r2(max(drops.values()))}).")
    if gains:
        fresh_relative = {n: _series(f, "tokens since sentence end").max() for n, f in untrained.items()}
        direction = ("grows" if min(gains.values()) > 0 else "falls" if max(gains.values()) < 0 else "changes")
        low, high = min(r.iloc[0] for r in relative.values()), max(r.iloc[0] for r in relative.values())
        start = _r2(low) if _r2(low) == _r2(high) else f"{_r2(low)} to {_r2(high)}"
        moved = {"grows": "up from", "falls": "down from"}.get(direction, "against")
        lines.append(f"The distance to the last sentence end, a relative quantity, {direction} with depth: R² after "
                     f"the last block {_listing({n: relative[n].iloc[-1] for n in gains})}, {moved} {start}"
                     f" at the input; untrained models reach at most {_r2(max(fresh_relative.values()))}"
                     + (", as much as a trained model here: an untrained stack already carries that much, so this "
                        "is not something training added." if max(relative[n].iloc[-1] for n in gains) <=
                        max(fresh_relative.values()) else "."))
    return lines


def method_sentence(*, fitted: int, scored: int, window: int, windows: str) -> str:
    """What the probe figure measured: the tokens each probe was fitted and scored on (`windows` says which texts
    the windows came from), what R² means, and the range its penalty was picked from."""
    return (f"Measured: for each residual stream, a ridge regression fitted on {fitted:,} tokens "
            f"and scored on {scored:,} tokens of other windows of {window} tokens (windows: {windows}), predicting each "
            f"token's position in its {window}-token window (top) and how many tokens back the "
            "last sentence end (. ! ? or a newline) was (bottom). R² 1 is a perfect read-out, 0 no better than the "
            "mean, below 0 worse than the mean on new windows (a probe fitted to chance patterns). The penalty is "
            f"picked per probe on held-out windows, from {PENALTIES[0]:.0e} to {PENALTIES[-1]:.0e} times the mean "
            "eigenvalue of XᵀX (hover a point to see it and the mean error in tokens).")
