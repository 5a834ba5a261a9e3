"""The Embeddings views: the sentence's token, position and summed rows, and their figures; and,
for a scheme that adds no rows, where it acts instead (shared with Similarity).

The view and the chips are cached per (model, token ids) as data; the panels are recipes that
lpos.ui.export draws (and keeps).
"""
from __future__ import annotations

from dataclasses import dataclass

from lpos.analysis import embeddings
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.embeddings import embedding_heatmaps, embedding_panels, token_chips_html
from lpos.pages import page_named
from lpos.positions import PositionScheme
from lpos.ui.caching import cache_data
from lpos.ui.models import LoadedModel

ATTENTION_PAGE = page_named("attention").file  # every scheme that acts inside attention has its section there
ORDER_PAGE = page_named("shuffle").file


@cache_data(max_entries=256, show_spinner=False)
def embedding_view(model: LoadedModel, ids: list[int]) -> embeddings.EmbeddingView:
    """The rows of `ids` in `model`, with its training counts."""
    return embeddings.embedding_view(model.model, list(ids), counts=embeddings.token_counts(model.meta),
                                     tokenizer=model.tokenizer)


@cache_data(max_entries=256, show_spinner=False)
def token_chips(model: LoadedModel, ids: list[int]) -> str:
    """The sentence's token chips: escaped HTML for st.html."""
    return token_chips_html(embedding_view(model, ids))


def heatmaps_page(view: embeddings.EmbeddingView, *, scheme: str) -> str:
    """The three tables as one figure of three subplots, in an HTML page that works offline: built when a
    download asks for it (about 30 ms, most of a new sentence's figure work if built on every run)."""
    return embedding_heatmaps(view, scheme=scheme).to_html(include_plotlyjs=True)


def embedding_panel_figures(model: LoadedModel, ids: list[int]) -> list[Recipe]:
    """The three tables as three figures' recipes (lpos.figures.export), for columns a phone stacks
    (heatmaps_page's one figure of three subplots is the download)."""
    steps = (step("counts", embeddings.token_counts, Ref("meta")),
             step("view", embeddings.embedding_view, Ref("model"), list(ids), counts=Ref("counts"),
                  tokenizer=Ref("tokenizer")),
             step("panels", embedding_panels, Ref("view"),
                  scheme=model.scheme))
    return [Recipe(steps, pick=panel) for panel in range(3)]


@dataclass(frozen=True)
class WhereItActs:
    page: str  # the page file where the scheme does act
    sentence: str  # one line: it adds no rows, and what it does instead
    link: str  # the link's text
    icon: str


def where_it_acts(scheme: PositionScheme) -> WhereItActs:
    """For a scheme that adds no position rows: the attention page when it acts inside attention,
    else the order-blindness experiment (a model with no position information at all)."""
    if scheme.in_attention:
        return WhereItActs(ATTENTION_PAGE, f"{scheme.label} adds no position rows: it {scheme.acts}.",
                           f"See what {scheme.label} does inside attention", ":material/rotate_right:")
    return WhereItActs(ORDER_PAGE, f"{scheme.label}: no position rows and nothing inside attention, so the first "
                       "layer cannot tell the order of earlier tokens (from layer 2 on the causal mask leaks some).",
                       "See the order-blindness experiment", ":material/shuffle:")
