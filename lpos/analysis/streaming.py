"""The attention sink, tested: stream a long text through a window of W tokens, with and without
the first tokens kept (StreamingLLM, Xiao et al. 2023).

Each token is predicted from (a) the W tokens before it alone, or (b) the first `sink` tokens of
the text followed by those W tokens. The context is run as a fresh sequence, so positions start
again at 0 inside it, as a rolling cache re-indexes them. Until the text is longer than the window
both contexts are the whole prefix; after that they differ only by the kept first tokens.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lpos.analysis.counts import listed
from lpos.analysis.lengths import output_count, token_losses, uniform_guess_sentence
from lpos.analysis.scheme_views import crossing_chance
from lpos.model import GPT

SINK_TOKENS = 4  # what StreamingLLM keeps
WINDOWS = (8, 16, 32, 64, 96, 124)  # 124 + 4 kept tokens fills a 128-row learned table
SCORED = 512  # predictions past the first window, where the two streams differ
MIN_SCORED = 32  # what the largest uploads get
STREAM_BUDGET = 40e9  # multiply-adds per stream (the shipped models need ~3e10 at W = 64): large uploads stream less
# A gain counts beyond this many standard errors of the mean per-token difference (its noise band). The
# page compares every shipped model at once: a model with no effect crosses a band of three standard errors
# by chance 0.27% of the time (two-sided normal), so with the ten shipped models about one test in 37 shows a
# false gain somewhere (at two standard errors, 4.6% each: one test in 2.7).
NOISE_ERRORS = 3


@dataclass(frozen=True)
class SinkTest:
    window: int
    sink: int
    alone: np.ndarray  # (N,) loss of predicting token i+1 with the window alone; NaN outside the vocabulary
    with_sink: np.ndarray  # (N,) the same with the first `sink` tokens kept in front


def streamed_tokens(model: GPT, *, window: int) -> int:
    """How many tokens of text to stream through `model`: the first window and SCORED more, fewer (down
    to MIN_SCORED) for a model so large that would cost more than STREAM_BUDGET."""
    config = model.config
    per_prediction = (window + SINK_TOKENS) * 12 * config.n_embd ** 2 * config.n_layer  # a block: 12 C² per token
    return int(window + 1 + max(MIN_SCORED, min(SCORED, STREAM_BUDGET // per_prediction)))


def streamed_ids(model: GPT, texts: dict[str, list[int]], *, window: int) -> list[int]:
    """The texts one after another, cut to the tokens the streaming test of `model` reads (streamed_tokens)."""
    return [t for ids in texts.values() for t in ids][: streamed_tokens(model, window=window)]


@torch.no_grad()
def last_token_losses(model: GPT, contexts: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Loss of predicting `targets` (B,) after each context (B, T), scoring the last position only
    (the full-vocabulary softmax of forward, restricted to output_vocab when the model has one)."""
    hidden, _ = model.hidden_states(contexts, keep_attention=False)  # (B, T, C)
    logits = model.output_logits(hidden[:, -1])  # (B, vocab), -inf outside output_vocab
    losses = F.cross_entropy(logits, targets, reduction="none")
    return losses.masked_fill(logits.gather(1, targets[:, None])[:, 0].isneginf(), float("nan"))


def streaming_losses(model: GPT, ids: list[int], *, window: int, sink: int = 0, batch_size: int = 64) -> np.ndarray:
    """Loss of predicting each token 1..T-1 of `ids` from the `window` tokens before it, after the
    first `sink` tokens of the text (never repeated when the window already holds them): (T-1,)."""
    if len(ids) < 2:
        raise ValueError("streaming needs at least two tokens: one to read, one to predict")
    if window < 1:
        raise ValueError("the window must hold at least one token")
    if max(ids) >= model.config.vocab_size:
        raise ValueError(f"this model's vocabulary has {model.config.vocab_size:,} tokens, fewer than GPT-2's: it "
                         "cannot read this text")
    longest = window + sink
    rows = model.max_input_length
    if rows is not None and longest > rows:
        raise ValueError(f"a window of {window} plus {sink} kept tokens needs {longest} rows; the learned table "
                         f"has {rows}. Pick a window of at most {rows - sink}.")
    tokens = torch.tensor(ids, dtype=torch.long)
    prefix = min(window, len(ids) - 1)  # predictions 0..prefix-1 see their whole prefix: one plain forward
    losses = [token_losses(model, tokens[: prefix + 1])]
    groups: dict[int, list[int]] = defaultdict(list)  # context length -> predicting positions t (from tokens ..t)
    for t in range(prefix, len(ids) - 1):
        start = t - window + 1
        groups[min(sink, start) + window].append(t)
    later = torch.full((len(ids) - 1 - prefix,), math.nan)
    for length, positions in groups.items():
        for first in range(0, len(positions), batch_size):
            chosen = positions[first : first + batch_size]
            contexts = torch.stack([torch.cat([tokens[: min(sink, t - window + 1)], tokens[t - window + 1 : t + 1]])
                                    for t in chosen])  # (b, length)
            targets = tokens[[t + 1 for t in chosen]]
            later[[t - prefix for t in chosen]] = last_token_losses(model, contexts, targets)
    return torch.cat([*losses, later]).numpy()


def sink_test(model: GPT, ids: list[int], *, window: int, sink: int = SINK_TOKENS) -> SinkTest:
    """Both streams over the same text."""
    return SinkTest(window=window, sink=sink, alone=streaming_losses(model, ids, window=window),
                    with_sink=streaming_losses(model, ids, window=window, sink=sink))


def sink_summary(test: SinkTest) -> dict:
    """Means over the predictions past the first window (where the two streams differ): window
    alone, with the kept tokens, the gain (alone minus with sink), its standard error and the noise
    band (NOISE_ERRORS standard errors) a gain must leave to count."""
    alone, kept = test.alone[test.window :], test.with_sink[test.window :]
    valid = ~(np.isnan(alone) | np.isnan(kept))
    if valid.sum() < 2:
        return {"tokens": int(valid.sum()), "alone": math.nan, "with sink": math.nan, "gain": math.nan, "error": math.nan,
                "noise": math.nan}
    gain = alone[valid] - kept[valid]
    error = float(gain.std(ddof=1) / math.sqrt(valid.sum()))
    return {"tokens": int(valid.sum()), "alone": float(alone[valid].mean()), "with sink": float(kept[valid].mean()),
            "gain": float(gain.mean()), "error": error, "noise": NOISE_ERRORS * error}


def sink_verdict(summary: dict) -> str:
    """"helps", "hurts" or "no clear change": a gain counts when it leaves its noise band
    (NOISE_ERRORS standard errors)."""
    if math.isnan(summary["gain"]):
        return "not measured"
    if abs(summary["gain"]) <= NOISE_ERRORS * summary["error"]:
        return "no clear change"
    return "helps" if summary["gain"] > 0 else "hurts"


def sink_reading(summaries: dict[str, dict], *, window: int, sink: int = SINK_TOKENS) -> list[str]:
    """Sentences from the per-scheme summaries: which scheme the kept tokens help, by how much."""
    measured = {s: v for s, v in summaries.items() if not math.isnan(v["gain"])}
    if not measured:
        return [f"The text is not longer than the window of {window} tokens, so both streams are the same."]
    lines = []
    for scheme, summary in sorted(measured.items(), key=lambda item: -item[1]["gain"]):
        verdict = {"helps": "the kept tokens **help**", "hurts": "the kept tokens **hurt**"}.get(
            sink_verdict(summary), "**no clear change** (within noise)")
        lines.append(f"**{scheme}**: {summary['alone']:.3f} with the window alone, {summary['with sink']:.3f} with the "
                     f"first {sink} tokens kept ({-summary['gain']:+.3f} nats per token, noise band "
                     f"± {NOISE_ERRORS * summary['error']:.3f} over {summary['tokens']} predictions): {verdict}.")
    helped = [s for s, v in measured.items() if sink_verdict(v) == "helps"]
    if helped:
        best = max(helped, key=lambda s: measured[s]["gain"])
        band = f"beyond its noise band of ± {NOISE_ERRORS * measured[best]['error']:.3f}"
        if len(helped) == 1:
            lines.append(f"Keeping the first {sink} tokens helps only **{best}**, by {measured[best]['gain']:.3f} "
                         f"nats per token, {band}.")
        else:
            tied = [s for s in helped if f"{measured[s]['gain']:.3f}" == f"{measured[best]['gain']:.3f}"]  # as printed
            most = (f"most of all **{best}**, by {measured[best]['gain']:.3f} nats per token, {band}" if len(tied) == 1
                    else f"most of all {listed([f'**{s}**' for s in tied])}, tied at {measured[best]['gain']:.3f} nats "
                         "per token each, beyond their noise bands")
            lines.append(f"Keeping the first {sink} tokens helps {listed(helped)}; {most}.")
    else:
        best = max(measured, key=lambda s: measured[s]["gain"] / max(measured[s]["noise"], 1e-12))  # nearest its band
        nearest = measured[best]
        gained = (f"the gain nearest to leaving its band, {best}'s {nearest['gain']:.3f} nats per token, is within "
                  f"noise (± {nearest['noise']:.3f})" if nearest["gain"] > 0 else "no scheme gains at all")
        lines.append(f"Keeping the first {sink} tokens helps no scheme beyond its noise band ({NOISE_ERRORS} standard "
                     f"errors of the per-token difference): {gained}. These small models lean on no sink token the "
                     "way Xiao et al. (2023) found in large ones.")
    lines.append("The signed number in each line is the change in loss when the first tokens are kept: minus means "
                 "they lower the loss (they help), plus that the loss rises with them (they hurt).")
    return lines


def streaming_sentence(measured_on: str, *, window: int, sink: int = SINK_TOKENS) -> str:
    """How the streaming figure was measured, on `measured_on` (which tokens of which text)."""
    return (f"Measured on {measured_on}: each token is predicted from "
            f"(a) the {window} tokens before it alone, or (b) the first {sink} tokens of the text "
            "followed by those tokens, each run as a fresh sequence so positions start at 0 (as a rolling "
            "cache re-indexes them). Left of the dashed line both see the whole prefix and agree.")


def untrained_sentence(model: GPT) -> str:
    """Why an untrained model's streaming losses say nothing: they sit near an even guess."""
    return (f"An untrained model's loss sits near {uniform_guess_sentence(model)}, an even "
            f"guess over its {output_count(model):,} tokens, whatever it reads: a difference here "
            "comes from random weights, not from anything learned. Pick a shipped model in the sidebar.")


def noise_sentence(compared: int) -> str:
    """When a gain counts, and how often `compared` schemes with no effect would cross a band by chance."""
    return (f"A gain counts only outside its noise band, {NOISE_ERRORS} standard errors of the "
            f"mean per-token difference: {compared} schemes are compared at once, and if none had an effect, at "
            f"least one would cross a band of two standard errors by chance {crossing_chance(2, compared):.0%} of "
            f"the time, and a band of {NOISE_ERRORS} standard errors {crossing_chance(NOISE_ERRORS, compared):.0%} of "
            "the time.")
