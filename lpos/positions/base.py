"""What a position scheme is, as hooks: the one interface the model, the attention path, analysis,
figures, pages, the CLI, training, the card and precompute ask.

A scheme module in this folder defines `SCHEME`, an instance of a `PositionScheme` subclass; the
registry (`lpos.positions`) finds it by itself. Nothing outside this folder compares a scheme's
name: it asks the scheme (`adds_rows`, `max_length`, `shows(view)`, `colour`, ...).

Hooks, in the order a forward pass meets them:
- `model_parameters(config)`: modules the whole model holds (a learned table, a bias table shared by
  every layer), registered in `GPT.transformer` under their names;
- `input_positions(config, T, offset)`: where an input's tokens sit (0..T-1 unless a scheme samples);
- `position_rows(model, positions)`: the rows added to the token rows, or None;
- `layer_parameters(config)`: modules each attention layer holds (a bias function, a table);
- `rotate(attention, q, k, positions, rope_scaling)`: how queries and keys change;
- `bias(attention, first_query, T, S, offset=0)`: added to the scaled scores before the causal mask;
- `score_term(attention, scores, q)`: added after the mask, computed from the masked scores and
  the queries (a contextual scheme's count).

What a scheme does is said once, by its `views`: `adds_rows`, `has_table` and `in_attention` are read
from them. A scheme whose bias depends only on where each query and key sit (ALiBi, T5, FIRE) subclasses
`DistanceBias` and gives `distance_bias` the distances; the `bias` hook around it is written once, here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from lpos.meta_device import shapes_only

# The views a page can draw for a scheme; a scheme says which apply to it (`views`).
VIEWS = (
    "rows",  # position rows added to token rows (Embeddings, Similarity, the PCA)
    "table",  # those rows are a table with a last row (Length extrapolation's coverage, learned-32)
    "sinusoids",  # a fixed sin/cos table (Sinusoids' bands)
    "rotation",  # queries and keys rotated (RoPE's angles, its scalings on Stretching)
    "bias",  # a bias on the scores that depends on distance (ALiBi's lines, T5's buckets, FIRE's curve)
    "contextual",  # positions counted from the content (CoPE's gates and counts)
)
ATTENTION_VIEWS = frozenset({"rotation", "bias", "contextual"})  # the views of a scheme that acts inside attention


@dataclass(frozen=True)
class Paper:
    title: str
    authors: str  # "Press et al. 2021"
    url: str


def distances(first_query: int, T: int, S: int, *, device=None) -> torch.Tensor:
    """i - j (T, S) of queries first_query..first_query+T-1 against keys 0..S-1 (negative: a key after its
    query, which the causal mask hides)."""
    queries = torch.arange(first_query, first_query + T, device=device)
    return queries[:, None] - torch.arange(S, device=device)[None, :]  # (T, S)


class PositionScheme:
    """One position scheme: what it says about itself and what it does, through hooks. Subclasses
    set the class attributes and override the hooks that apply; the defaults do nothing."""

    name: str = ""
    order: int = 100  # where it comes in lists (the five classic schemes first)
    label: str = ""  # as a title: "ALiBi"
    colour: str = "#7f7f7f"  # its line and bar colour on every chart
    hint: str = ""  # one line for the sidebar
    explanation: str = ""  # one paragraph: what it does and where it acts
    paper: Paper | None = None
    finding: str = ""  # what its paper reports about it, set beside lpos's own numbers (Length extrapolation)
    views: frozenset[str] = frozenset()  # what it does, as the views that apply to it (VIEWS)
    # How much faster than the rest of the model this scheme's own weights (`model_parameters`,
    # `layer_parameters`) learn; 1.0: the same rate and decay as every other weight. Any other value also
    # leaves them out of weight decay (lpos.train.make_optimizer).
    learning_rate_scale: float = 1.0

    # ------------------------------------------------------------ what it says

    def shows(self, view: str) -> bool:
        if view not in VIEWS:
            raise ValueError(f"unknown view {view!r}; views are {VIEWS}")
        return view in self.views

    @property
    def acts(self) -> str:
        """Where it acts, in a sentence that follows "It " (Embeddings' empty panel, the attention page): its
        hint, unless the scheme sets `acts` to say it another way."""
        return self.hint

    @property
    def adds_rows(self) -> bool:
        """Adds a position row to each token row before the first block."""
        return "rows" in self.views

    @property
    def has_table(self) -> bool:
        """One row per position: inputs stop at its last row."""
        return "table" in self.views

    @property
    def in_attention(self) -> bool:
        """Acts inside attention: rotates q and k, biases the scores or adds to them."""
        return not self.views.isdisjoint(ATTENTION_VIEWS)

    def max_length(self, config) -> int | None:
        """The longest input (offset included) a model of this scheme reads; None: any length."""
        return config.block_size if self.has_table else None

    def check_config(self, config) -> None:
        """ValueError for a GPTConfig this scheme cannot run."""

    def for_config(self, config) -> PositionScheme:
        """The scheme as a model of `config` runs it (`GPT.scheme`): itself, unless the config sets what the
        scheme reads (a real model's RoPE settings)."""
        return self

    def parameter_count(self, config) -> int:
        """Weights this scheme adds to a model of `config`, counted on the meta device (nothing allocated: a
        file may declare a huge table)."""
        with shapes_only():
            model = sum(p.numel() for m in self.model_parameters(config).values() for p in m.parameters())
            layer = sum(p.numel() for m in self.layer_parameters(config).values() for p in m.parameters())
        return model + config.n_layer * layer

    def initialise(self, model, *, table_std: float) -> None:
        """Redraw this scheme's own weights as training starts them (after GPT-2's initialisation)."""

    # ------------------------------------------------------------ what it does

    def model_parameters(self, config) -> dict[str, nn.Module]:
        return {}

    def layer_parameters(self, config) -> dict[str, nn.Module]:
        return {}

    def input_positions(self, config, T: int, offset: int, device=None) -> torch.Tensor:
        """The positions (T,) an input of T tokens reads from `offset` on: offset..offset+T-1."""
        return torch.arange(offset, offset + T, device=device)

    def position_rows(self, model, positions: torch.Tensor) -> torch.Tensor | None:
        """The rows (T, C), or (B, T, C) for per-sequence positions (B, T), added at `positions`."""
        return None

    def rotate(self, attention, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               rope_scaling=None) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def bias(self, attention, first_query: int, T: int, S: int, *, offset: int = 0) -> torch.Tensor | None:
        """Added to the scaled scores (nh, T, S) of queries first_query..first_query+T-1 against keys 0..S-1,
        every position shifted by `offset` (a relative bias ignores it; one that reads where the query sits,
        such as FIRE's normaliser, must not)."""
        return None

    def score_term(self, attention, scores: torch.Tensor, q: torch.Tensor) -> torch.Tensor | None:
        """Added to the masked scores (B, nh, T, S), from them and the queries (B, nh, T, hs)."""
        return None

    def __repr__(self) -> str:
        return f"<position scheme {self.name}>"


class DistanceBias(PositionScheme):
    """A scheme that acts only by a bias on the scores computed from where each query and key sit (ALiBi,
    T5, FIRE). Subclasses give `distance_bias`; `bias` builds what it reads."""

    views = frozenset({"bias"})

    def bias(self, attention, first_query: int, T: int, S: int, *, offset: int = 0) -> torch.Tensor:
        device = attention.c_attn.weight.device
        queries = torch.arange(first_query + offset, first_query + offset + T, device=device)  # (T,): where they sit
        return self.distance_bias(attention, distances(first_query, T, S, device=device), queries)

    def distance_bias(self, attention, distance: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        """The bias (nh, T, S) from the distances i - j (T, S) and where each query really sits (T,), the
        offset included (a relative bias reads the distances alone, so an offset cancels; FIRE's normaliser
        reads the queries)."""
        raise NotImplementedError
