"""Stretching the context: RoPE scaling measured on a trained model, and positions as a shift.

- Loss against evaluation length for a RoPE model as trained and under each rescaling (ROPE_METHODS), with
  the models that read any length without rotating beside it. Every length scores the same predictions: each text is cut into
  chunks of 1,024 tokens and every chunk into windows of L, so a curve moves only because the
  window (the context) grows.
- (Per pair, what each method does to the wavelengths: lpos.analysis.scaling.)
- Past the wall: the largest attention logit and the attention entropy at every position
  (Position Interpolation's diagnosis: positions outside training give outsized scores).
- A shift: the same sentence at positions k.. instead of 0..; relative schemes cannot tell.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lpos import corpus
from lpos.model import GPT
from lpos.positions import AS_TRAINED, RESCALINGS, REGISTRY, ROPE_METHOD_NAMES, RopeScaling, scheme_info
from lpos.tokenizer import GPT2, Tokenizer

LENGTHS = (128, 256, 512, 1024)
CHUNK = 1024  # tokens per chunk; every evaluation length divides it
EVAL_CHUNKS = 4  # chunks drawn evenly from the held-out stream: 4,096 predictions
ATTENTION_ENTRIES = 4 * 4 * 1024 * 1024  # 4 windows of 1,024 tokens, 4 heads (the shipped shape): 64 MB a layer


def chunks(stream: torch.Tensor, *, count: int | None = None, length: int = CHUNK) -> torch.Tensor:
    """`count` chunks of length+1 tokens spread evenly over `stream` (all that fit when None),
    (n, length+1): each chunk's tokens and the next one, its last target."""
    fit = (len(stream) - 1) // length
    if fit == 0:
        raise ValueError(f"the text has {len(stream)} tokens; a chunk needs {length + 1}")
    count = fit if count is None else min(count, fit)
    starts = np.linspace(0, len(stream) - length - 1, count).round().astype(int) if count > 1 else [0]
    return torch.stack([stream[s : s + length + 1] for s in starts])



def story_chunk(*, tokenizer: Tokenizer = GPT2) -> torch.Tensor:
    """The built-in story's first chunk (1, CHUNK+1) in `tokenizer`'s tokens (characters its vocabulary
    lacks left out): the text Stretching's losses are read on first."""
    return chunks(torch.tensor(tokenizer.encode_known(corpus.story())[0]), count=1)


def held_out_chunks(meta: dict) -> torch.Tensor | None:
    """EVAL_CHUNKS chunks (n, CHUNK+1) spread over the held-out stream of `meta`'s corpus (None when its
    files are not on this machine)."""
    stream = corpus.held_out_stream(meta)
    return None if stream is None else chunks(stream, count=EVAL_CHUNKS)


def story_window(*, tokenizer: Tokenizer = GPT2) -> list[int]:
    """The story's first CHUNK tokens in `tokenizer`'s: what the attention profiles read."""
    return story_chunk(tokenizer=tokenizer)[0, :CHUNK].tolist()


@torch.no_grad()
def chunk_losses(model: GPT, texts: torch.Tensor, *, lengths=LENGTHS, rope_scaling: RopeScaling | None = None,
                 batch_size: int = 4) -> dict[int, dict]:
    """{L: {"loss", "windows", "tokens"}} over `texts` (n, CHUNK+1) read in windows of L tokens;
    {"loss": None, "note": why} where the model cannot read L tokens."""
    results = {}
    for length in lengths:
        rows = model.max_input_length
        if rows is not None and length > rows:
            results[length] = {"loss": None, "note": f"n/a: the table has {rows} rows"}
            continue
        span = texts.shape[1] - 1
        x = texts[:, :span].reshape(-1, length)  # (n * span / L, L)
        y = texts[:, 1:].reshape(-1, length)
        # as many windows at once as keep one layer's attention weights (batch, nh, L, L) within
        # ATTENTION_ENTRIES: a wider model at 1,024 tokens reads fewer windows at a time
        batch = max(1, min(batch_size, ATTENTION_ENTRIES // (model.config.n_head * length * length)))
        losses = torch.cat([model.vocab_loss(x[i : i + batch], y[i : i + batch], reduction="none",
                                             rope_scaling=rope_scaling).reshape(-1)
                            for i in range(0, len(x), batch)])
        known = ~losses.isnan()
        results[length] = {"loss": round(float(losses[known].mean()), 4), "windows": len(x), "tokens": int(known.sum())}
    return results


def curve_name(scheme: str, method: str = AS_TRAINED.name, factor: float = 1.0) -> str:
    """A loss curve's name: the scheme's, and for a scheme that rotates, the scaling applied to it."""
    if not scheme_info(scheme).shows("rotation") or method == AS_TRAINED.name:
        return scheme
    return f"{scheme} + {ROPE_METHOD_NAMES[method]} ×{factor:g}"


def loss_frame(results: dict[str, dict[int, dict]], *, text: str) -> pd.DataFrame:
    """Rows (text, curve, length, loss, tokens) from {curve name: chunk_losses(...)}."""
    return pd.DataFrame([{"text": text, "curve": name, "length": length, "loss": entry["loss"],
                          "tokens": entry.get("tokens")}
                         for name, table in results.items() for length, entry in table.items()])


def loss_reading(frame: pd.DataFrame, *, train_length: int, factor: float) -> str:
    """Markdown: what the measured curves say, method by method, from the numbers only."""
    lines = []
    for text, rows in frame.groupby("text", sort=False):
        table = rows.pivot(index="length", columns="curve", values="loss")
        rotating = [c for c in table if c in REGISTRY and REGISTRY[c].shows("rotation")]
        if not rotating:
            continue
        rotated = rotating[0]
        longest = int(table.index.max())
        base = table[rotated]
        lines.append(f"**{text}**, at {longest} tokens: {rotated} as trained **{base[longest]:.3f}**.")
        for method in RESCALINGS:
            name = curve_name(rotated, method, factor)
            if name not in table:
                continue
            change = table[name] - base  # (lengths,)
            past = change[change.index > train_length]
            helped = [int(length) for length, delta in past.items() if delta < -0.005]
            verdict = (f"helps at {', '.join(map(str, helped))} tokens" if helped else
                       f"helps at no length past training: at each it is worse than plain {rotated} or within 0.005 of it")
            within = change.get(train_length)
            cost = f"; at {train_length} tokens it costs {within:+.3f}" if within is not None and within > 0.005 else ""
            lines.append(f"- {ROPE_METHOD_NAMES[method]} ×{factor:g}: {table[name][longest]:.3f} "
                         f"({change[longest]:+.3f}); {verdict}{cost}.")
        for other in table:
            if other in REGISTRY and not REGISTRY[other].shows("rotation"):
                lines.append(f"- {other} (for reference): {table[other][longest]:.3f}.")
    return "\n".join(lines) or "No curve of a rotating scheme was measured."


@torch.no_grad()
def attention_profile(model: GPT, ids: list[int], *, rope_scaling: RopeScaling | None = None) -> pd.DataFrame:
    """Per layer and query position: the largest attention logit (over heads and keys) and the
    attention entropy in nats (mean over heads). Rows (layer, position, max_logit, entropy)."""
    idx = torch.tensor([ids], dtype=torch.long)
    # the streams only: each layer's (nh, T, T) weights are rebuilt below one layer at a time, never all kept
    streams = model.trace(idx, rope_scaling=rope_scaling, keep_attention=False, keep_residual=True).residual  # each (1, T, C)
    rows = []
    for layer, (block, x) in enumerate(zip(model.transformer.h, streams)):
        scores = attention_logits(block, x, rope_scaling=rope_scaling)  # (nh, T, T), -inf above the diagonal
        weights = F.softmax(scores, dim=-1)
        entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1).mean(0)  # (T,)
        rows.append(pd.DataFrame({"layer": layer, "position": np.arange(len(ids)),
                                  "max_logit": scores.amax(dim=(0, 2)).numpy(), "entropy": entropy.numpy()}))
    return pd.concat(rows, ignore_index=True)


def attention_logits(block, x: torch.Tensor, *, rope_scaling: RopeScaling | None) -> torch.Tensor:
    """One block's pre-softmax scores (nh, T, T) for its input x (1, T, C), from its attention's own
    steps (the max logit Position Interpolation's diagnosis reads)."""
    positions = torch.arange(x.shape[1])  # (T,)
    q, k, _ = block.attn.project(block.ln_1(x), positions=positions, rope_scaling=rope_scaling)  # (1, nh, T, hs)
    return block.attn.scores(q, k)[0]


SHIFT_OFFSETS = range(1, 513)  # the offsets Stretching's shift section offers
SHIFT_OFFSET = 64  # and the one it starts at


@torch.no_grad()
def offset_change(model: GPT, ids: list[int], *, offset: int) -> float | None:
    """max |change| of the last position's logits when the sentence sits at positions offset..
    instead of 0..; None when the model cannot place it there (the learned table ends)."""
    if model.max_input_length is not None and offset + len(ids) > model.max_input_length:
        return None
    idx = torch.tensor([ids], dtype=torch.long)
    # only the last position's logits are compared, and only those of the tokens the model can write (the others
    # are -inf at every position): the head runs on those two rows, over its own vocabulary
    at_zero = model.hidden_states(idx, keep_attention=False)[0][0, -1]  # (C,)
    shifted = model.hidden_states(idx, keep_attention=False, offset=offset)[0][0, -1]  # (C,)
    a, b = model.output_scores(torch.stack([at_zero, shifted]))  # (V',) each
    finite = a.isfinite()  # a score a broken file made NaN or infinite is left out, as the logits' -inf were
    return float((a[finite] - b[finite]).abs().max())


ROUNDING = 1e-4  # a shift that moves the logits less than this is float rounding


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def shift_sentence(changes: list[tuple[str, float | None]], *, tokens: int, offset: int,
                   table_rows: dict[str, int | None] | None = None) -> str:
    """Section 5's reading of the shift table, (scheme, max |change| or None) per row, each scheme said by
    what its change measures: within float rounding (it reads only differences between positions, or
    none), or more (a row per absolute position; or a scheme that adds none yet reads where the tokens sit,
    as FIRE's normaliser past its threshold does); and which could not be shifted (`table_rows`: each
    scheme's table length, so one that cannot hold the sentence even at offset 0 is said so)."""
    still = [(s, c) for s, c in changes if c is not None and c < ROUNDING]
    moved = [(s, c) for s, c in changes if c is not None and c >= ROUNDING and scheme_info(s).adds_rows]
    sited = [(s, c) for s, c in changes if c is not None and c >= ROUNDING and not scheme_info(s).adds_rows]
    ended = [s for s, c in changes if c is None]
    said = [f"Your sentence ({tokens} token{'s' if tokens != 1 else ''}) at offset 0 and at offset {offset}."]
    if still:
        one = len(still) == 1
        said.append(f"{_listed([s for s, _ in still])} {'changes' if one else 'change'} at most "
                    f"{max(c for _, c in still):.1e}: float rounding (what {'it reads' if one else 'they read'} is "
                    "the differences between positions, or nothing).")
    if sited:
        one = len(sited) == 1
        each = ", ".join(f"{s} {c:.2f}" for s, c in sited)
        said.append(f"{_listed([s for s, _ in sited])} add{'s' if one else ''} no row for an absolute position, yet "
                    f"{'its' if one else 'their'} change is more than float rounding ({each}): what "
                    f"{'it computes' if one else 'they compute'} depends on where the sentence sits, not only on "
                    "the distances between its tokens.")
    if moved:
        each = ", ".join(f"{s} {c:.2f}" for s, c in moved)
        said.append(f"{_listed([s for s, _ in moved])} add{'s' if len(moved) == 1 else ''} a row for each absolute "
                    "position, so the last "
                    f"position's logits move (largest change: {each}).")
    rows = table_rows or {}
    too_long = [s for s in ended if rows.get(s) is not None and tokens > rows[s]]
    ended = [s for s in ended if s not in too_long]
    if too_long:
        said.append(f"{_listed(too_long)} cannot hold your sentence even at offset 0: "
                    + "; ".join(f"{s}'s table has {rows[s]:,} rows" for s in too_long) + ", fewer than its "
                    f"{tokens:,} tokens, so there is nothing to shift.")
    if ended:
        said.append(f"{_listed(ended)} cannot be shifted this far: the sentence would end past the table's last "
                    "row (see the table).")
    said.append("That is why a relative model can keep its cached keys as the window slides along a long text, where "
                "an absolute one must recompute.")
    return " ".join(said)


def shifted_rows_sentence(name: str, model: GPT, *, tokens: int, offset: int) -> str | None:
    """Which table rows `model` adds to a `tokens`-token sentence at offset 0 and at `offset`, when those are not
    its positions (a table read at random positions); None when they are, or when nothing is added. `model`: a
    GPT, or what else has its `config`, `scheme` and `max_input_length` (a shipped model's card)."""
    if not model.scheme.adds_rows:
        return None
    rows = lambda at: model.scheme.input_positions(model.config, tokens, at)  # noqa: E731  (tokens,)
    at_zero = rows(0)
    if torch.equal(at_zero, torch.arange(tokens)):
        return None
    shown = lambda read: f"rows {int(read[0]):,} to {int(read[-1]):,}"  # noqa: E731
    shifted = (f"and {shown(rows(offset))} at offset {offset}" if model.max_input_length is None
               or offset + tokens <= model.max_input_length else f"and none at offset {offset}")
    return (f"{name} reads its table at random positions, not at the sentence's positions: {shown(at_zero)} at "
            f"offset 0 {shifted}.")


def trained_sentence(label: str, *, train_length: int, base: float) -> str:
    """What the rescaled model was trained on, as the page's introduction says it."""
    return f"{label} was trained on {train_length:,}-token windows (RoPE base {base:,g})"


def _focus(gap: float) -> str:
    """"0.89 nats more focused than even" (or "more spread than even")."""
    return f"{abs(gap):.2f} nats {'more focused' if gap >= 0 else 'more spread'} than even"


def profile_reading(profiles: dict[str, pd.DataFrame], *, layer: int, train_length: int) -> str:
    """Markdown: mean largest logit and entropy within and past the training length, per curve, each against
    its baseline: the entropy of an even spread over the visible keys (ln(p + 1) at position p), which grows
    with the position whatever the model does, and whether the largest logit rises past the wall."""
    lines = []
    for name, frame in profiles.items():
        rows = frame[frame["layer"] == layer]
        within, past = rows[rows["position"] < train_length], rows[rows["position"] >= train_length]
        if past.empty:
            continue
        even_in, even_past = np.log(within["position"] + 1.0).mean(), np.log(past["position"] + 1.0).mean()
        logit_in, logit_past = within["max_logit"].mean(), past["max_logit"].mean()
        rise = logit_past - logit_in
        logit = ("rises" if rise > 0.05 * abs(logit_in) else "falls" if rise < -0.05 * abs(logit_in) else "hardly moves")
        gap_in, gap_past = even_in - within["entropy"].mean(), even_past - past["entropy"].mean()
        lines.append(f"- **{name}**: largest logit {logit_in:.2f} within the first {train_length} positions, "
                     f"{logit_past:.2f} past them (it {logit}); entropy {within['entropy'].mean():.2f} → "
                     f"{past['entropy'].mean():.2f} nats, against {even_in:.2f} → {even_past:.2f} for an even spread "
                     f"over the visible keys, which grows with the position by itself: {_focus(gap_in)} before the "
                     f"wall, {_focus(gap_past)} past it.")
    return "\n".join(lines)
