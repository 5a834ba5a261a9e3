"""The Similarity views: position x position maps, the band, the PCA path, RoPE's kernel, and
nearest tokens; each cached per model (named by its key, lpos.ui.caching) and size.

The maps and the PCA do not depend on the sidebar sentence: they are kept as built figures
(`st.cache_resource`), so a new sentence rebuilds none of them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lpos.analysis import similarity, timeline
from lpos.analysis.embeddings import token_counts
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.similarity import similarity_heatmaps
from lpos.positions import scheme_info
from lpos.ui.caching import cache_data, cache_resource
from lpos.ui.coverage import trained_rows
from lpos.ui.models import LoadedModel
from lpos.ui.export import drawn
from lpos.ui.sinusoids import FIGURES, LIFETIME


def position_maps(model: LoadedModel, length: int, *, with_untrained: bool, apart: bool = False) -> go.Figure | list[Recipe]:
    """Cosine similarity of a model's first `length` position rows, and of the table it started from:
    its own step-0 snapshot when it kept one, else a random N(0, 0.02) draw (seed 0), titled as such.
    `apart`: one recipe (lpos.figures.export) per map (lpos.figures.similarity.similarity_panels),
    for columns a phone stacks; else the maps as one figure."""
    gpt, analysis = model.model, "lpos.analysis.similarity"
    steps = [step("rows", f"{analysis}.position_rows", Ref("model"), length),
             step("trained", f"{analysis}.similarity_map", Ref("rows"), title=f"{model.label}: {gpt.config.position} rows")]
    if with_untrained:
        shown = len(similarity.position_rows(gpt, length))  # a table stops at its last row
        if timeline.starting_rows(model.meta, shown) is not None:
            steps += [step("start", "lpos.analysis.timeline.starting_rows", Ref("meta"), shown),
                      step("start_map", f"{analysis}.similarity_map", Ref("start"), title="the same table at step 0")]
        else:
            steps += [step("start", f"{analysis}.initial_position_rows", shown, gpt.config.n_embd),
                      step("start_map", f"{analysis}.similarity_map", Ref("start"), title="a random N(0, 0.02) table")]
    maps = [Ref("trained")] + ([Ref("start_map")] if with_untrained else [])
    builder = "similarity_panels" if apart else "similarity_heatmaps"
    steps.append(step("maps" if apart else "fig", f"lpos.figures.similarity.{builder}", maps, axis_title="position"))
    if apart:
        return [Recipe(tuple(steps), pick=number) for number in range(len(maps))]
    return drawn(Recipe(tuple(steps)), model)


def second_map_sentence(model: LoadedModel) -> str:
    """What position_maps drew beside a trained table: its own step-0 snapshot, or a random stand-in."""
    if timeline.starting_rows(model.meta, 2) is not None:
        return "The second map is this model's own table at step 0, kept in its file: speckle around 0 with a diagonal of 1s."
    return ("The second map is a random N(0, 0.02) table (seed 0), standing in for the start: this file kept no step-0 "
            "table. Speckle around 0 with a diagonal of 1s.")


def position_band(model: LoadedModel, length: int) -> tuple[Recipe, dict]:
    """The band, measured: mean cosine by distance of the model's rows (and its step-0 rows), as a
    recipe (lpos.figures.export), and the table's structure figures (lpos.analysis.timeline.table_structure)."""
    gpt = model.model
    rows = similarity.position_rows(gpt, length)
    steps = [step("rows", "lpos.analysis.similarity.position_rows", Ref("model"), length),
             step("band", "lpos.analysis.similarity.cosine_by_distance", Ref("rows"))]
    bands = {f"{gpt.config.position} rows": Ref("band")}
    if scheme_info(gpt.config.position).has_table and timeline.starting_rows(model.meta, len(rows)) is not None:
        steps += [step("start", "lpos.analysis.timeline.starting_rows", Ref("meta"), len(rows)),
                  step("start_band", "lpos.analysis.similarity.cosine_by_distance", Ref("start"))]
        bands["the same table at step 0"] = Ref("start_band")
    steps.append(step("fig", "lpos.figures.timeline.band_figure", bands,
                      title=f"The band, measured: mean cosine by distance ({len(rows)} rows)"))
    return Recipe(tuple(steps)), band_structure(model, length)


@cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def band_structure(model: LoadedModel, length: int) -> dict:
    return timeline.table_structure(similarity.position_rows(model.model, length))


def position_pca(model: LoadedModel, length: int) -> tuple[Recipe, Recipe, str]:
    """The 2-D and 3-D PCA path of a model's first `length` position rows, as recipes
    (lpos.figures.export), and what they show."""
    shown, reading = pca_reading(model, length)
    name = f"{shown} {model.model.config.position} position rows"
    steps = (step("rows", "lpos.analysis.similarity.position_rows", Ref("model"), length),
             step("projection", "lpos.analysis.similarity.pca", Ref("rows"), components=3))
    return tuple(Recipe((*steps, step("fig", "lpos.figures.similarity.pca_figure", Ref("projection"), dimensions=d,
                                      title=f"{name}, {d}-D"))) for d in (2, 3)) + (reading,)


@cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def pca_reading(model: LoadedModel, length: int) -> tuple[int, str]:
    """How many rows the PCA path has, and its caption."""
    table = similarity.position_rows(model.model, length)
    projection = similarity.pca(table, components=3)
    return len(table), pca_sentence(table, projection, scheme=model.model.config.position, trained=model.trained,
                                    limit=trained_rows(model))


def step_ratio(points: np.ndarray) -> float:
    """Mean distance between consecutive rows over the mean distance between any two rows of
    `points` (n, k): about 1 for a random cloud, 3/(n+1) for evenly spaced points on a line."""
    n = len(points)
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1).mean()
    pairs = np.linalg.norm(points[:, None] - points[None], axis=-1).sum() / (n * (n - 1))  # (n, n) summed
    return float(steps / pairs)


def order_sentence(points: np.ndarray, *, rows: str) -> str:
    """How orderly the path of `points` is, measured by step_ratio against a cloud and a line."""
    n = len(points)
    ratio, line = step_ratio(points), 3 / (n + 1)
    score = (1 - ratio) / (1 - line)  # 1: as orderly as a line; 0: a random cloud
    verdict = ("they run in position order" if score >= 0.6 else "a cloud with no order" if score <= 0.2 else
               "partly in position order")
    return (f"{rows}: on the path, neighbouring positions sit {ratio:.2f}× as far apart as two of these rows picked at random "
            f"(about 1 for a random cloud, {line:.2f} for evenly spaced points on a line): {verdict}.")


def pca_sentence(table: np.ndarray, projection: similarity.Projection, *, scheme: str, trained: bool,
                 limit: int | None) -> str:
    """The PCA caption for the rows drawn: the variance explained, how orderly the path is in the
    three components (measured), and which rows are random (untrained, or past a short-window
    model's `limit`)."""
    n, points = len(table), projection.coordinates
    said = f"The first three components explain {projection.explained.sum():.0%} of the variance of these {n} rows. "
    if n <= 4:  # n centred rows span at most n - 1 directions: three components hold them all
        said = (f"{n} rows, once centred, span at most {n - 1} direction{'s' if n != 2 else ''}, so three components "
                "hold all of their variance by construction: this picture is exact, not a finding. ")
    if scheme_info(scheme).shows("sinusoids"):
        return said + order_sentence(points, rows=f"The {scheme} rows, a smooth curve by construction")
    if not trained:
        return said + order_sentence(points, rows="These rows are random (untrained)")
    if limit is None or n <= limit + 1:
        return said + order_sentence(points, rows="The trained rows")
    lengths = np.linalg.norm(table, axis=1)
    return said + (order_sentence(points[:limit], rows=f"Rows 0–{limit - 1}, trained") + " " +
                   order_sentence(points[limit:], rows=f"Rows {limit}–{n - 1}, never trained and still random, "
                                  f"{lengths[limit:].mean() / lengths[:limit].mean():.2f}× as long as the trained "
                                  "rows on average (so bunched in a small knot)"))


def rope_kernel(length: int, head_dim: int, *, base: float) -> tuple[Recipe, Recipe, str]:
    """RoPE's position x position kernel and the same kernel by offset at the model's base, as
    recipes (lpos.figures.export), and what the line shows (its range read off the drawn line)."""
    analysis = "lpos.analysis.similarity"
    kernel = Recipe((step("kernel", f"{analysis}.rope_kernel", length, head_dim, base=base),
                     step("kernel_map", f"{analysis}.similarity_map", Ref("kernel"), title="rope kernel"),
                     step("fig", "lpos.figures.similarity.similarity_heatmaps", [Ref("kernel_map")],
                          axis_title="position")))
    line = Recipe((step("line", f"{analysis}.rope_kernel_by_offset", length - 1, head_dim, base=base),
                   step("fig", "lpos.figures.similarity.kernel_line_figure", Ref("line"), head_dim=head_dim)))
    return kernel, line, kernel_reading(length, head_dim, base=base)


@st.cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def kernel_reading(length: int, head_dim: int, *, base: float) -> str:
    line = similarity.rope_kernel_by_offset(length - 1, head_dim, base=base)
    return similarity.rope_kernel_sentence(line, head_dim=head_dim, base=base)


@cache_data(max_entries=64, show_spinner=False)
def nearest_tokens(model: LoadedModel, token_id: int, *, k: int) -> pd.DataFrame:
    return similarity.nearest_tokens(model.model, token_id, k=k, counts=token_counts(model.meta), tokenizer=model.tokenizer)


@st.cache_resource(max_entries=32, ttl=600, show_spinner=False)
def token_map(rows: np.ndarray, *, title: str, tokens: list[str]) -> go.Figure:
    """The sentence's token x token cosine map of `rows`."""
    return similarity_heatmaps([similarity.similarity_map(rows, title=title)], axis_title="token", tokens=tokens)
