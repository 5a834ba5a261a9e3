"""Which rows look alike: cosine maps of positions and tokens, nearest neighbours, and a PCA of
the position rows.

A learned table starts as random rows (all pairs near cosine 0); training carves a smooth band
along the diagonal, because neighbouring positions must mean nearly the same thing. The
sinusoidal table has that band by construction, and RoPE has no rows at all: its counterpart is
the kernel cos-similarity of one vector rotated to positions m and n, which depends on m - n only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.analysis.sinusoids import block_average
from lpos.checkpoints.families import bases_by_layer_words
from lpos.model import GPT
from lpos.analysis.attention import head_frequencies, rotating_scheme
from lpos.positions import sinusoidal_table
from lpos.tokenizer import GPT2, Tokenizer, visible

FULL_RESOLUTION = 256  # maps up to this size are drawn cell by cell; larger ones are block-averaged


@dataclass(frozen=True)
class SimilarityMap:
    values: np.ndarray  # (n, n) cosine similarities, block-averaged when block > 1
    block: int  # rows/positions averaged into one cell (1: full resolution)
    size: int  # rows of the full map
    title: str  # what was compared, for the figure


@dataclass(frozen=True)
class Projection:
    coordinates: np.ndarray  # (T, k) the rows projected on their first k principal components
    explained: np.ndarray  # (k,) share of the variance each component explains


def cosine_similarity_map(rows: np.ndarray | torch.Tensor) -> np.ndarray:
    """Cosine similarity of every pair of rows, (n, n); a zero row has similarity 0 to all."""
    rows = torch.as_tensor(rows, dtype=torch.float64)
    norms = rows.norm(dim=-1, keepdim=True)  # (n, 1)
    unit = rows / norms.clamp(min=1e-12)
    return (unit @ unit.T).clamp(-1.0, 1.0).numpy()  # (n, n)


def similarity_map(rows: np.ndarray | torch.Tensor, *, title: str, max_size: int = FULL_RESOLUTION) -> SimilarityMap:
    """Cosine map of the rows, block-averaged to at most max_size x max_size cells for drawing."""
    full = cosine_similarity_map(rows)
    values, block, _ = block_average(full, max_rows=max_size, max_columns=max_size)
    return SimilarityMap(values.astype(np.float32), block, len(full), title)


def position_rows(model: GPT, length: int) -> np.ndarray | None:
    """The rows this model's scheme adds at positions 0..length-1 (a table's stop at its last row), or None
    when it adds none. A sinusoidal table is returned unscaled: no cosine or nearest row sees the scale."""
    scheme = model.scheme
    if not scheme.adds_rows:
        return None
    if scheme.shows("sinusoids"):
        return sinusoidal_table(length, model.config.n_embd).numpy()
    rows = min(length, model.max_input_length or length)
    with torch.no_grad():
        return scheme.position_rows(model, torch.arange(rows)).detach().numpy()


def initial_position_rows(length: int, width: int, *, seed: int = 0) -> np.ndarray:
    """Rows of a learned table before training: N(0, 0.02), as GPT-2 initialises them."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(length, width, generator=generator) * 0.02).numpy()


def rope_kernel(length: int, head_dim: int, *, base: float = 10000.0, scheme: str = "rope",
                share: float | None = None) -> np.ndarray:
    """Cosine similarity of one vector rotated by a rotating `scheme` to positions m and n, (length, length).

    For a vector whose pairs have equal length this is mean_i cos((m - n) w_i): a function of
    m - n alone, the rotary counterpart of a position similarity map (a pair that never turns, w_i = 0, adds 1).
    """
    frequencies = head_frequencies(head_dim, base=base, scheme=scheme, share=share)  # (head_dim/2,)
    positions = torch.arange(length, dtype=torch.float64)
    offsets = positions[:, None] - positions[None, :]  # (length, length)
    return torch.cos(offsets[..., None] * frequencies).mean(dim=-1).numpy()


def nearest(table: torch.Tensor, row: int, *, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine similarities of the k rows most like `row`, itself excluded."""
    norms = table.norm(dim=-1).clamp(min=1e-12)  # (n,): no normalised copy of the table (50,257 rows: 4 times slower)
    scores = (table @ table[row]) / (norms * norms[row])  # (n,)
    scores[row] = -float("inf")
    top = torch.topk(scores, min(k, len(table) - 1))
    return top.indices.numpy(), top.values.numpy()


@torch.no_grad()
def nearest_tokens(model: GPT, token_id: int, *, k: int = 10, counts: dict[int, int] | None = None,
                   tokenizer: Tokenizer = GPT2) -> pd.DataFrame:
    """The k token rows closest to `token_id`'s row, over the tokenizer's whole vocabulary (rows past
    it, a model's padding, are never offered).

    Columns: rank, id, token, cosine, and count (training count) when the model has counts.
    A row never seen in training is still its random initial row, so its neighbours mean nothing.
    """
    table = model.transformer.wte.weight.detach()[: tokenizer.vocab_size]  # (V, C)
    if not 0 <= token_id < len(table):
        raise ValueError(f"token id {token_id} is outside the vocabulary of {len(table)} rows")
    indices, scores = nearest(table, token_id, k=k)
    frame = pd.DataFrame({
        "rank": np.arange(1, len(indices) + 1),
        "id": indices,
        "token": [visible(t) for t in tokenizer.token_strings(indices.tolist())],
        "cosine": scores,
    })
    return frame if counts is None else frame.assign(count=[counts.get(int(i), 0) for i in indices])


def nearest_positions(rows: np.ndarray, position: int, *, k: int = 10) -> pd.DataFrame:
    """The k position rows closest to `position`'s row. Columns: rank, position, distance, cosine."""
    if not 0 <= position < len(rows):
        raise ValueError(f"position {position} is outside the table's {len(rows)} rows")
    indices, scores = nearest(torch.as_tensor(rows, dtype=torch.float64), position, k=k)
    return pd.DataFrame({"rank": np.arange(1, len(indices) + 1), "position": indices,
                         "distance": np.abs(indices - position), "cosine": scores})


def pca(rows: np.ndarray, *, components: int = 3) -> Projection:
    """Project centred rows on their first principal components (at most min(T, C) of them).

    Eigenvectors of the C x C covariance rather than an SVD of the T x C rows: the same axes,
    and fast for a thousand rows.
    """
    centred = torch.as_tensor(rows, dtype=torch.float64)
    centred = centred - centred.mean(dim=0, keepdim=True)  # (T, C)
    variances, axes = torch.linalg.eigh(centred.T @ centred)  # ascending, (C,), (C, C)
    variances, axes = variances.flip(0).clamp(min=0), axes.flip(1)
    k = min(components, *centred.shape)
    total = float(variances.sum())
    explained = (variances[:k] / total).numpy() if total > 0 else np.zeros(k)
    return Projection(coordinates=(centred @ axes[:, :k]).numpy(), explained=explained)


def cosine_by_distance(rows: np.ndarray | torch.Tensor) -> pd.DataFrame:
    """The band, measured: the mean cosine of every pair of rows at each distance |i - j| >= 1.
    Columns: distance, cosine, pairs."""
    full = cosine_similarity_map(rows)
    n = len(full)
    distances = np.arange(1, n)
    return pd.DataFrame({"distance": distances,
                         "cosine": [float(np.diagonal(full, offset=d).mean()) for d in distances],
                         "pairs": n - distances})


def mean_neighbour_distance(rows: np.ndarray | torch.Tensor, *, k: int = 10) -> float:
    """How far, in positions, the k rows most like each row sit from it, averaged over all rows
    (about n/3 for random rows; small when nearby positions have similar rows)."""
    full = cosine_similarity_map(rows)
    n = len(full)
    np.fill_diagonal(full, -np.inf)
    top = np.argsort(-full, axis=1)[:, : min(k, n - 1)]  # (n, k)
    return float(np.abs(top - np.arange(n)[:, None]).mean())


def random_neighbour_distance(rows: int) -> float:
    """The mean distance of a row's nearest rows when the rows are random: any other row is as likely,
    so the mean |i - j| over all pairs i != j of `rows` rows, which is (rows + 1) / 3."""
    return (rows + 1) / 3 if rows > 1 else 0.0


def neighbour_sentence(distance: float, rows: int, *, k: int = 10, indexed: bool = True) -> str:
    """"each row's 10 most similar rows sit 3.8 positions away on average (about 7 for random rows)",
    for the `rows` rows the distance was measured over (positions 0 to rows - 1); `indexed=False` for a table
    read at random positions, whose row numbers are not the positions of the tokens that read them."""
    where = "positions" if indexed else "rows"
    if rows < 2:
        return f"with one {where[:-1]} there is no other row to compare it with"
    if k >= rows - 1:  # every other row is a "most similar" one: the distance is fixed by the count
        others = f"{rows - 1} other row{'s' if rows > 2 else ''}"
        return (f"among {where} 0–{rows - 1} each row has only {others}, so the distance to its {k} most similar "
                f"rows would take in every row there is and says nothing here (it needs more than {k + 1} {where})")
    return (f"among {where} 0–{rows - 1}, each row's {k} most similar rows sit {distance:.1f} {where} away on "
            f"average (about {random_neighbour_distance(rows):.0f} for random rows)")


def rope_kernel_by_offset(max_offset: int, head_dim: int, *, base: float = 10000.0, scheme: str = "rope",
                          share: float | None = None) -> pd.DataFrame:
    """The rope kernel as a line: mean_i cos(k w_i) for k = 0..max_offset. Columns: offset, similarity."""
    offsets = np.arange(max_offset + 1)
    frequencies = head_frequencies(head_dim, base=base, scheme=scheme, share=share).numpy()
    return pd.DataFrame({"offset": offsets, "similarity": np.cos(offsets[:, None] * frequencies).mean(axis=1)})


def frequencies_said(head_dim: int, *, base: float, scheme: str = "rope", share: float | None = None) -> str:
    """How a rotating scheme's pair frequencies ωᵢ are made, for a sentence: "ωᵢ = 10,000^(−2i/32)", with the pairs
    that never turn said apart."""
    rotated = rotating_scheme(scheme, share).rotated_width(head_dim)
    still = int((head_frequencies(head_dim, base=base, scheme=scheme, share=share) == 0).sum())
    return f"ωᵢ = {base:,g}^(−2i/{rotated})" + (f"; ωᵢ = 0 for the last {still}, which never turn" if still else "")


def rope_kernel_sentence(kernel: pd.DataFrame, *, head_dim: int, base: float, past: int = 10, scheme: str = "rope",
                         share: float | None = None) -> str:
    """What the drawn kernel line (rope_kernel_by_offset) is, with its range past distance `past`
    read off the line itself: the mean of cos(k w_i), a cosine only for equal-length pairs."""
    values, offsets = kernel["similarity"].to_numpy(), kernel["offset"].to_numpy()
    what = (f"The same kernel as a line: the mean of cos(k·ωᵢ) over the {head_dim // 2} frequency pairs of a "
            f"{head_dim}-column head ({frequencies_said(head_dim, base=base, scheme=scheme, share=share)}). It is the cosine between one vector rotated to "
            "two positions k apart only when all the vector's pairs have the same length; a real query and key score "
            "Σᵢ |qᵢ||kᵢ| cos(k·ωᵢ + φᵢ), with each pair's own lengths and angle.\n")
    last = int(offsets[-1])
    if last <= past:  # the slider's shortest maps end before `past`
        return what + f"It is 1 at distance 0 and {values[-1]:.2f} at distance {last}, the farthest drawn."
    far, far_offsets = values[past:], offsets[past:]
    low, high = int(np.argmin(far)), int(np.argmax(far))
    said = (what + f"It is 1 at distance 0 and {values[past]:.2f} at distance {past}; from distance {past} to {last} "
            f"it stays between {far[low]:.2f} (at distance {far_offsets[low]}) and {far[high]:.2f} "
            f"(at distance {far_offsets[high]})")
    below = np.flatnonzero(values < 0)
    return said + (f": it first drops below 0 at distance {offsets[below[0]]}." if len(below) else
                   ": it stays above 0 over this whole range rather than decaying to nothing.")


def rope_kernel_map_sentence(*, label: str, head_dim: int, base: float, scheme: str = "rope",
                             share: float | None = None, layer_bases: tuple[float, ...] = ()) -> str:
    """What the rope kernel map (rope_kernel) stands for, for a scheme that adds no rows, at the model's head size and
    base (its first layer's; `layer_bases`: each layer's, when they differ)."""
    own = ("this model's" if len(set(layer_bases)) <= 1 else
           f"layer 1's: this model's layers turn with {len(set(layer_bases))} RoPE bases, {bases_by_layer_words(layer_bases)}")
    return (f"{label} adds no rows. Its counterpart: the mean of cos((m − n)·ωᵢ) over the {head_dim // 2} pairs of "
            f"this model's {head_dim}-column heads (base {base:,g}, {own}; "
            f"{frequencies_said(head_dim, base=base, scheme=scheme, share=share)}), the cosine between "
            "one vector rotated to positions m and n when all its pairs have the same length.\n"
            "Every diagonal is constant: the kernel depends on m − n only.")


def table_read_sentence(*, window: int, rows: int, randomized: bool, shown: int, short_label: str | None) -> str:
    """How training read a table of `rows` rows in windows of `window` tokens (in order, or at random
    positions), with `shown` rows on the map; `short_label`: a model trained on shorter windows to pick."""
    read = (f"Every row of this table was read in every training batch (windows of {window} tokens)." if not randomized
            else f"Training read this table's {rows:,} rows at random: each window of {window} tokens took a sorted "
            f"random {window} of them (randomized positions, Ruoss et al. 2023), so rows far past {window} trained too."
            + (f" The slider shows the first {shown}: raise it to {rows:,} to see them all." if shown < rows else ""))
    return read + (f" Pick {short_label} in the sidebar to see rows that training never reached." if short_label else "")


def never_trained_sentence(*, limit: int, rows: int, shown: int, source: str) -> str:
    """Why rows `limit`..`rows` - 1 of a table trained on windows of at most `limit` tokens are as they
    started, only scaled; `source`: where the step-0 table comes from; `shown`: rows on the map."""
    return (f"This model trained on windows of at most {limit} tokens, so rows {limit} to {rows - 1} "
            "were never read and got no gradient. Weight decay scales every matrix a little at each step; a row "
            f"with no gradient is only scaled, never turned. Step-0 table: {source}."
            + (f" The slider shows {shown} rows: raise it past {limit} to see the rows that never trained."
               if shown <= limit else ""))


def search_sentence(tokenizer: Tokenizer, *, counted: bool) -> str:
    """What the nearest-token search runs over, and, with training counts (`counted`), what a count means."""
    return (f"Search runs over all {tokenizer.vocab_size:,} tokens of {tokenizer.name}, the tokenizer's vocabulary."
            + (" “count” is how often the token occurs in the training stories; training drew random windows from "
               "them, so a rare token may never have been in a batch.\nRows of tokens that never occur (count 0) are "
               "still their random initial rows, so they can turn up by chance." if counted else ""))
