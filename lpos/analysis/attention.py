"""Inside attention: the weights per layer and head, what RoPE does to a query, and what ALiBi's
bias does to the weights.

RoPE turns pair i of a query at position m by m w_i and of a key at n by n w_i; a rotation
preserves dot products up to the difference of the angles, so q·k depends on m - n alone.
ALiBi adds -slope_h (m - n) to the scores of head h before the softmax: the same scores, tilted
towards recent tokens, more steeply in heads with larger slopes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lpos.checkpoints.families import layer_practice
from lpos.model import GPT
from lpos.positions import ALIBI, NO_POSITIONS, REGISTRY, PositionScheme, alibi_bias, alibi_slopes, rope_rotate, scheme_info


@dataclass(frozen=True)
class AlibiEffect:
    slopes: np.ndarray  # (nh,) per-head slope
    bias: np.ndarray  # (nh, T, T) -slope * distance, 0 above the diagonal
    with_bias: np.ndarray  # (nh, T, T) softmax(scores + bias), causal
    without_bias: np.ndarray  # (nh, T, T) softmax(scores), causal: the same scores, bias removed


def check_layer(model: GPT, layer: int) -> None:
    if not 0 <= layer < model.config.n_layer:
        raise ValueError(f"layer {layer} is out of range; this model has layers 0 to {model.config.n_layer - 1}")


@torch.no_grad()
def layer_input(model: GPT, ids: list[int], *, layer: int) -> torch.Tensor:
    """What enters block `layer` for the sentence (1, T, C)."""
    check_layer(model, layer)
    return model.trace(torch.tensor([ids], dtype=torch.long), keep_attention=False, keep_residual=True).residual[layer]


@torch.no_grad()
def attention_maps(model: GPT, ids: list[int], *, layer: int) -> np.ndarray:
    """The attention weights of one layer, (nh, T, T): row = query position, column = key position."""
    check_layer(model, layer)
    block = model.transformer.h[layer]  # only this layer's weights are ever held: at 1,024 tokens each layer's take nh × 4 MB
    _, weights = block.attn(block.ln_1(layer_input(model, ids, layer=layer)))  # (1, nh, T, T)
    return weights[0].numpy()


@torch.no_grad()
def queries_and_keys(model: GPT, ids: list[int], *, layer: int, rotate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The queries and keys of one layer, (nh, T, hs) each: as its attention reads them (a rope
    model's rotated) if `rotate`, else as the heads project them, before any rotation."""
    x = layer_input(model, ids, layer=layer)
    block = model.transformer.h[layer]
    positions = torch.arange(len(ids)) if rotate else None  # (T,)
    q, k, _ = block.attn.project(block.ln_1(x), positions=positions)  # (1, nh, T, hs) each
    return q[0], k[0]


def query_and_key(model: GPT, ids: list[int], *, layer: int, head: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The query and key (hs,) of the token at `position` in one head, before any rotation: what RoPE turns."""
    q, k = queries_and_keys(model, ids, layer=layer, rotate=False)  # (nh, T, hs)
    return q[head, position], k[head, position]


@torch.no_grad()
def alibi_effect(model: GPT, ids: list[int], *, layer: int) -> AlibiEffect:
    """The layer's scores with and without ALiBi's bias. For an alibi model `with_bias` is its own
    attention; for any other it is what the bias would do to the same scores."""
    q, k = queries_and_keys(model, ids, layer=layer, rotate=True)  # (nh, T, hs) as the model reads them
    attn = model.transformer.h[layer].attn
    weights = {alibi: F.softmax(attn.scores(q[None], k[None], scheme=ALIBI if alibi else NO_POSITIONS)[0], dim=-1)
               for alibi in (True, False)}
    return AlibiEffect(
        slopes=alibi_slopes(model.config.n_head).numpy(),
        bias=alibi_bias(model.config.n_head, len(ids)).numpy(),
        with_bias=weights[True].numpy(),  # (nh, T, T)
        without_bias=weights[False].numpy(),  # (nh, T, T)
    )


def in_attention_sentence() -> str:
    """What each scheme that acts inside attention does, a sentence each, and that none of them adds
    token rows (when so): the attention page's opening."""
    inside = [s for s in REGISTRY.values() if s.in_attention]
    return (" ".join(f"{s.label} {s.acts}." for s in inside)
            + (" None of them adds anything to the token rows." if not any(s.adds_rows for s in inside) else ""))


def alibi_slopes_sentence(slopes: np.ndarray) -> str:
    """ALiBi's slope per head (nh,), listed, and what a steep or a gentle slope does."""
    return (f"For {len(slopes)} heads the slopes are {', '.join(f'{s:.3g}' for s in slopes)}.\n"
            "Steep heads mark far keys down most, so they lean hardest towards recent tokens; gentle heads hardly "
            "mind distance.")


def key_head_sentence(model: GPT, *, layer: int, head: int) -> str:
    """Which key head query head `head` is compared with under grouped-query attention (Llama); "" when
    every query head has a key head of its own."""
    config = model.config
    if not config.n_kv_head or config.n_kv_head >= config.n_head:
        return ""
    return (f"This model has {config.n_kv_head} key heads for its {config.n_head} query heads: each key head "
            f"serves {config.n_head // config.n_kv_head} query heads in a row, so query head {head + 1} is "
            f"compared with key head {model.transformer.h[layer].attn.key_head(head) + 1}.")


def rotating_scheme(scheme: str, share: float | None = None) -> PositionScheme:
    """Rotating `scheme`, turning the first `share` of each head's columns where a model's configuration says its
    own share (GPTConfig.rope_share: Pythia's rotary_pct); None: the scheme's own."""
    return scheme_info(scheme).with_share(share)


def head_frequencies(head_dim: int, *, base: float = 10000.0, scheme: str = "rope",
                     share: float | None = None) -> torch.Tensor:
    """The angle (radians) each pair of a head of rotating `scheme` (turning `share` of its columns, see
    rotating_scheme) turns per position (head_dim/2,); 0 for a pair that never turns."""
    return rotating_scheme(scheme, share).head_frequencies(head_dim, None, base)


def rope_angle_frame(head_dim: int, *, base: float = 10000.0, scheme: str = "rope",
                     share: float | None = None) -> pd.DataFrame:
    """Per pair of a head's columns: the angle it turns per position (radians, degrees) and its
    wavelength in positions (inf for a pair that never turns)."""
    frequencies = head_frequencies(head_dim, base=base, scheme=scheme, share=share).numpy()
    with np.errstate(divide="ignore"):
        wavelength = 2 * math.pi / frequencies
    return pd.DataFrame({"pair": np.arange(head_dim // 2), "radians": frequencies,
                         "degrees": np.degrees(frequencies), "wavelength": wavelength})


def rotation_map(model: GPT) -> pd.DataFrame:
    """Per layer and pair of a head: the angle it turns per position (0 where it never turns, or the layer rotates
    nothing). Rows (layer, pair, radians, rotates): the whole model's use of rotation at a glance."""
    scheme, config = model.scheme, model.config
    head_dim = config.head_size
    rows = []
    for layer, block in enumerate(model.transformer.h):  # each layer's own base (Gemma 3: local and global)
        frequencies = scheme.head_frequencies(head_dim, None, block.attn.rope_base).numpy()
        rows += [{"layer": layer, "pair": pair, "rotates": scheme.rotates_layer(layer),
                  "radians": float(frequencies[pair]) if scheme.rotates_layer(layer) else 0.0}
                 for pair in range(head_dim // 2)]
    return pd.DataFrame(rows)


def rotation_sentence(model: GPT) -> str:
    """What this rotating model turns, from its scheme: how many of each head's pairs turn, which never do, and
    which layers rotate nothing."""
    scheme, config = model.scheme, model.config
    head_dim = config.head_size
    frequencies = scheme.head_frequencies(head_dim, None, config.rope_base)
    turning = int((frequencies > 0).sum())
    pairs = head_dim // 2
    still = [layer + 1 for layer in range(config.n_layer) if not scheme.rotates_layer(layer)]
    if turning == pairs:
        said = ("In the layers that rotate, every" if still else "Every") + f" one of the {pairs} pairs of each head turns"
    elif scheme.rotated_width(head_dim) < head_dim:
        said = (f"Only the first {scheme.rotated_width(head_dim)} of each head's {head_dim} columns turn ({turning} "
                f"pairs, with speeds spread over those columns alone); the other {pairs - turning} pairs never turn and "
                "compare content alone")
    else:
        said = (f"{turning} of each head's {pairs} pairs turn, the fastest; the slowest {pairs - turning} have "
                "frequency 0, never turn and compare content alone at any distance")
    if still:
        named = ", ".join(map(str, still))
        said += (f". Layer{'s' if len(still) > 1 else ''} {named} rotate{'s' if len(still) == 1 else ''} nothing: "
                 f"{'it has' if len(still) == 1 else 'they have'} no position at all and attend{'s' if len(still) == 1 else ''} "
                 "by content alone")
    if config.layer_bases or config.sliding_windows:  # a real model's layers differ: say how (lpos.checkpoints.families)
        said += ". " + "; ".join(layer_practice(config))
    return said + "."


def rotating_pair(vector: torch.Tensor, *, pair: int, positions: int, base: float = 10000.0,
                  scheme: str = "rope", share: float | None = None) -> pd.DataFrame:
    """Columns (2 pair, 2 pair + 1) of `vector` (hs,) after `scheme`'s rotation at positions 0..positions-1.

    Columns: position, x, y, angle (radians turned). The length of the arrow never changes.
    """
    hs = vector.shape[-1]
    if not 0 <= pair < hs // 2:
        raise ValueError(f"pair {pair} is out of range; a head of {hs} columns has pairs 0 to {hs // 2 - 1}")
    steps = torch.arange(positions)
    frequencies = head_frequencies(hs, base=base, scheme=scheme, share=share)  # (hs/2,)
    rotated = rope_rotate(vector.to(torch.float64).expand(positions, hs), steps, frequencies=frequencies)  # (positions, hs)
    return pd.DataFrame({"position": steps.numpy(), "x": rotated[:, 2 * pair].numpy(),
                         "y": rotated[:, 2 * pair + 1].numpy(), "angle": (steps * frequencies[pair]).numpy()})


def rope_step_sentence(pair: int, head_dim: int, *, base: float = 10000.0, steps: int = 8, scheme: str = "rope",
                       share: float | None = None) -> str:
    """What the drawn arrow does: the angle pair `pair` turns per position, and, when the `steps` positions
    drawn turn it less than 5° in all, that the turn is too small to see (pair 15 of 32 columns: 0.01° a step);
    a pair that never turns says so."""
    degrees = math.degrees(float(head_frequencies(head_dim, base=base, scheme=scheme, share=share)[pair]))
    if degrees == 0:
        return (f"Pair {pair} never turns in this scheme: the arrow stays where it is at every position, so these two "
                "columns carry no position. Position is an angle in the pairs that turn, not an added row.")
    said = f"The arrow keeps its length and turns by the same angle per step, {degrees:.2g}° for pair {pair}"
    if degrees * (steps - 1) < 5:
        said += (f", {degrees * (steps - 1):.2g}° over the {steps} positions drawn: too little to see, so the "
                 "points lie on top of each other; a lower pair turns visibly")
    return said + ". Position is an angle, not an added row."


def rope_query_sentence(*, rotates: bool, layer: int, head: int, pair: int, head_dim: int, base: float,
                        steps: int, scheme: str = "rope", share: float | None = None) -> str:
    """Whose query the arrow is (the model's own when it `rotates` its queries), and what it does (rope_step_sentence)."""
    return (("This token's query in " if rotates else "This model's query (it does not rotate it) in ")
            + f"layer {layer + 1}, head {head + 1}, before rotation, placed at positions 0, 1, 2, …\n"
            + rope_step_sentence(pair, head_dim, base=base, steps=steps, scheme=scheme, share=share))


def rope_speed_sentence(head_dim: int, *, n_embd: int, base: float, scheme: str = "rope",
                        share: float | None = None) -> str:
    """How the speeds of a head's pairs step down: a geometric ladder over the columns that rotate, not the model's
    width; pairs that never turn said apart."""
    rotated = rotating_scheme(scheme, share).rotated_width(head_dim)
    turning = int((head_frequencies(head_dim, base=base, scheme=scheme, share=share) > 0).sum())
    still = head_dim // 2 - turning
    turning_word = f"{turning} pairs turns" if not still else f"{turning} turning pairs turns"
    columns = f"{head_dim} columns" if rotated == head_dim else f"{rotated} rotated columns"
    return (f"Each of the head's {turning_word} at its own speed: pair 0 one radian per position, the last almost not "
            f"at all.\nA geometric ladder like the sinusoidal table's, but over the head's {columns} ({rotated // 2} "
            f"pairs, each {base ** (-2 / rotated):.2f}× the speed of the one before), not the model's {n_embd}: RoPE "
            "rotates each head's q and k separately."
            + (f" The last {still} pair{'s' if still != 1 else ''} never turn{'s' if still == 1 else ''} (angle 0, "
               "left off the log scale)." if still else ""))


def offset_scores(query: torch.Tensor, key: torch.Tensor, *, offsets: list[int], length: int,
                  base: float = 10000.0, scheme: str = "rope", share: float | None = None) -> pd.DataFrame:
    """q·k after RoPE with the query at m and the key at n = m - offset, for every m that fits.

    Columns: offset, m, n, score. For each offset the score is the same number at every m.
    """
    hs = query.shape[-1]
    positions = torch.arange(length)
    frequencies = head_frequencies(hs, base=base, scheme=scheme, share=share)  # (hs/2,)
    queries = rope_rotate(query.to(torch.float64).expand(length, hs), positions, frequencies=frequencies)  # (length, hs)
    keys = rope_rotate(key.to(torch.float64).expand(length, hs), positions, frequencies=frequencies)  # (length, hs)
    frames = []
    for offset in offsets:
        m = torch.arange(offset, length)
        frames.append(pd.DataFrame({"offset": offset, "m": m.numpy(), "n": (m - offset).numpy(),
                                    "score": (queries[m] * keys[m - offset]).sum(dim=-1).numpy()}))
    return pd.concat(frames, ignore_index=True)
