"""The Similarity page's position half: the position slider and what it drives, the position x position
maps, the band, the rows training never reached, the nearest positions and the PCA path, and RoPE's
kernel for a scheme that adds no rows; each cached per model (named by its key, lpos.ui.caching) and
size. The token half (token x token map, nearest tokens) is lpos.ui.token_similarity.

The maps and the PCA do not depend on the sidebar sentence: they are kept as built figures
(`st.cache_resource`), so a new sentence rebuilds none of them.
"""
from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from lpos.analysis import similarity, timeline
from lpos.analysis.lengths import training_length
from lpos.analysis.counts import listed
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.similarity import kernel_line_figure, pca_figure, similarity_heatmaps, similarity_panels
from lpos.figures.timeline import band_figure
from lpos.positions import scheme_info, schemes_with
from lpos.ui import embeddings
from lpos.ui.caching import cache_data
from lpos.ui.coverage import drift_view, short_window_model, trained_rows
from lpos.ui.export import chart
from lpos.ui.models import LoadedModel
from lpos.ui.sinusoids import FIGURES, LIFETIME

NEAREST_POSITIONS = 10  # rows listed for "nearest positions of position"
NO_ROWS = (f"Nearest positions and the PCA path need position rows; this scheme has none (choose "
           f"{listed(schemes_with('rows'), 'or')}).")


def position_maps(model: LoadedModel, length: int, *, with_untrained: bool, apart: bool = False) -> Recipe | list[Recipe]:
    """Cosine similarity of a model's first `length` position rows, and of the table it started from:
    its own step-0 snapshot when it kept one, else a random N(0, 0.02) draw (seed 0), titled as such,
    as a recipe (lpos.figures.export). `apart`: one recipe per map
    (lpos.figures.similarity.similarity_panels), for columns a phone stacks; else the maps as one figure."""
    gpt = model.model
    steps = [step("rows", similarity.position_rows, Ref("model"), length),
             step("trained", similarity.similarity_map, Ref("rows"), title=f"{model.label}: {gpt.config.position} rows")]
    if with_untrained:
        shown = len(similarity.position_rows(gpt, length))  # a table stops at its last row
        if timeline.starting_rows(model.meta, shown) is not None:
            steps += [step("start", timeline.starting_rows, Ref("meta"), shown),
                      step("start_map", similarity.similarity_map, Ref("start"), title="the same table at step 0")]
        else:
            steps += [step("start", similarity.initial_position_rows, shown, gpt.config.n_embd),
                      step("start_map", similarity.similarity_map, Ref("start"), title="a random N(0, 0.02) table")]
    maps = [Ref("trained")] + ([Ref("start_map")] if with_untrained else [])
    builder = similarity_panels if apart else similarity_heatmaps
    steps.append(step("maps" if apart else "fig", builder, maps, axis_title="position"))
    if apart:
        return [Recipe(tuple(steps), pick=number) for number in range(len(maps))]
    return Recipe(tuple(steps))


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
    steps = [step("rows", similarity.position_rows, Ref("model"), length),
             step("band", similarity.cosine_by_distance, Ref("rows"))]
    bands = {f"{gpt.config.position} rows": Ref("band")}
    if scheme_info(gpt.config.position).has_table and timeline.starting_rows(model.meta, len(rows)) is not None:
        steps += [step("start", timeline.starting_rows, Ref("meta"), len(rows)),
                  step("start_band", similarity.cosine_by_distance, Ref("start"))]
        bands["the same table at step 0"] = Ref("start_band")
    steps.append(step("fig", band_figure, bands,
                      title=f"The band, measured: mean cosine by distance ({len(rows)} rows)"))
    return Recipe(tuple(steps)), band_structure(model, length)


@cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def band_structure(model: LoadedModel, length: int) -> dict:
    return timeline.table_structure(similarity.position_rows(model.model, length))


def map_caption(model: LoadedModel, length: int) -> str:
    """What the position maps of a model's first `length` rows show, with the band's own numbers."""
    structure, scheme = band_structure(model, length), model.model.scheme
    at = timeline.band_cosines(structure)
    if scheme.has_table and model.trained:
        shown, limit = rows_shown(model, length), trained_rows(model)
        mixed = ("" if limit is None or limit >= shown else  # the untrained rows' near-0 pairs dilute these means
                 f" These figures mix the {limit} trained rows with the {shown - limit} that never trained; rows "
                 f"0–{limit - 1} alone: mean cosine {timeline.band_cosines(band_structure(model, limit))}.")
        return (f"Trained (first map): mean cosine {at}; "
                f"{similarity.neighbour_sentence(structure['neighbour_distance'], shown, indexed=not model.config.random_positions)}.{mixed}\n"
                + second_map_sentence(model))
    if scheme.has_table:
        return ("Untrained: random rows are nearly orthogonal, so the map is speckle around 0 with a diagonal of 1s.\n"
                "Pick a trained learned model to see the band training carves.")
    if scheme.shows("sinusoids"):
        return (f"The {scheme.label.lower()} table has the band by construction (mean cosine {at}): similarity "
                "depends on distance only, so it is the same along every diagonal.")
    return f"{scheme.label}'s rows: mean cosine {at}."


@cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def rows_shown(model: LoadedModel, length: int) -> int:
    """How many of the first `length` position rows the model has (a table stops at its last row)."""
    return len(similarity.position_rows(model.model, length))


def position_pca(model: LoadedModel, length: int) -> tuple[Recipe, Recipe, str]:
    """The 2-D and 3-D PCA path of a model's first `length` position rows, as recipes
    (lpos.figures.export), and what they show."""
    shown, reading = pca_reading(model, length)
    name = f"{shown} {model.scheme} position rows"
    steps = (step("rows", similarity.position_rows, Ref("model"), length),
             step("projection", similarity.pca, Ref("rows"), components=3))
    return tuple(Recipe((*steps, step("fig", pca_figure, Ref("projection"), dimensions=d,
                                      title=f"{name}, {d}-D"))) for d in (2, 3)) + (reading,)


@cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def pca_reading(model: LoadedModel, length: int) -> tuple[int, str]:
    """How many rows the PCA path has, and its caption."""
    table = similarity.position_rows(model.model, length)
    projection = similarity.pca(table, components=3)
    return len(table), pca_sentence(table, projection, scheme=model.scheme, trained=model.trained,
                                    limit=trained_rows(model))


def step_ratio(points: np.ndarray) -> float:
    """Mean distance between consecutive rows over the mean distance between any two rows of
    `points` (n, k): about 1 for a random cloud, 3/(n+1) for evenly spaced points on a line."""
    x = torch.as_tensor(np.asarray(points), dtype=torch.float64)  # (n, k)
    n = len(x)
    steps = torch.diff(x, dim=0).norm(dim=1).mean()
    pairs = torch.cdist(x, x).sum() / (n * (n - 1))  # (n, n) distances summed, never an (n, n, k) array
    return float(steps / pairs)


def order_sentence(points: np.ndarray, *, rows: str) -> str:
    """How orderly the path of `points` is, measured by step_ratio against a cloud and a line."""
    n = len(points)
    ratio, line = step_ratio(points), 3 / (n + 1)
    score = (1 - ratio) / (1 - line)  # 1: as orderly as a line; 0: a random cloud
    verdict = ("they run in position order" if score >= 0.6 else "a cloud with no order" if score <= 0.2 else
               "partly in position order")
    return (f"{rows}: in the whole rows (all {points.shape[1]} dimensions, not only the three drawn), neighbouring "
            f"positions sit {ratio:.2f}× as far apart as two of these rows picked at random "
            f"(about 1 for a random cloud, {line:.2f} for evenly spaced points on a line): {verdict}.")


def pca_sentence(table: np.ndarray, projection: similarity.Projection, *, scheme: str, trained: bool,
                 limit: int | None) -> str:
    """The PCA caption for the rows drawn: the variance explained, how orderly the rows are (measured in the
    whole rows: three components may hold little of their variance), and which rows are random (untrained, or
    past a short-window model's `limit`)."""
    n, points = len(table), np.asarray(table)
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


def rope_kernel(length: int, head_dim: int, *, base: float, scheme: str,
                share: float | None = None) -> tuple[Recipe, Recipe, str]:
    """A rotating scheme's position x position kernel and the same kernel by offset at the model's base, as
    recipes (lpos.figures.export), and what the line shows (its range read off the drawn line)."""
    kernel = Recipe((step("kernel", similarity.rope_kernel, length, head_dim, base=base, scheme=scheme, share=share),
                     step("kernel_map", similarity.similarity_map, Ref("kernel"), title="rope kernel"),
                     step("fig", similarity_heatmaps, [Ref("kernel_map")],
                          axis_title="position")))
    line = Recipe((step("line", similarity.rope_kernel_by_offset, length - 1, head_dim, base=base, scheme=scheme,
                        share=share),
                   step("fig", kernel_line_figure, Ref("line"), head_dim=head_dim)))
    return kernel, line, kernel_reading(length, head_dim, base=base, scheme=scheme, share=share)


@st.cache_data(max_entries=FIGURES, ttl=LIFETIME, show_spinner=False)
def kernel_reading(length: int, head_dim: int, *, base: float, scheme: str, share: float | None = None) -> str:
    line = similarity.rope_kernel_by_offset(length - 1, head_dim, base=base, scheme=scheme, share=share)
    return similarity.rope_kernel_sentence(line, head_dim=head_dim, base=base, scheme=scheme, share=share)


def rows_never_trained(loaded: LoadedModel, length: int) -> None:
    """The table's second limit, for a model trained on windows shorter than its table."""
    config, limit = loaded.config, trained_rows(loaded)
    if limit is None:
        short = short_window_model()
        st.caption(similarity.table_read_sentence(window=training_length(loaded.meta, loaded.model), rows=config.block_size,
                                                  randomized=config.random_positions, shown=length,
                                                  short_label=short.label if short else None))
        return
    st.subheader("Rows training never reached")
    fig, reading, source = drift_view(loaded, length)
    chart(fig, name="similarity-rows-never-trained", model=loaded, key="sim_coverage")
    for line in reading:
        st.markdown(f"- {line}")
    st.caption(similarity.never_trained_sentence(limit=limit, rows=config.block_size, shown=length, source=source))


def position_slider(loaded: LoadedModel) -> int:
    """How many positions the maps draw: a link's own size, else the whole trained table (128 rows at most)."""
    limit = loaded.max_input_length or 1024
    asked = st.query_params.get("positions", "")  # a link may open the map at its own size
    whole = limit if loaded.config.random_positions else min(128, limit)  # a randomized table: every row trained
    start = int(asked) if asked.isdigit() and 2 <= int(asked) <= limit else whole
    return st.slider("Positions", min_value=2, max_value=max(2, limit), value=start, key=f"sim_length_{limit}",
                     help="Above 256 positions the map is block-averaged so the page stays light.")


def position_maps_section(loaded: LoadedModel, length: int) -> None:
    """The maps of the rows the scheme adds, their caption, and the band as a line."""
    table_trained = loaded.model.scheme.has_table and loaded.trained
    maps = position_maps(loaded, length, with_untrained=table_trained, apart=True)
    for column, key, panel in zip(st.columns(len(maps), gap="small"), ("sim_positions", "sim_positions_start"), maps):
        chart(panel, name=f"similarity-{key.replace('sim_positions', 'position-map')}", where=column,
              model=loaded, key=key)  # side by side; a phone stacks them
    band, _ = position_band(loaded, length)
    st.caption(map_caption(loaded, length))
    chart(band, name="similarity-band", model=loaded, key="sim_band")
    st.caption("The band along the diagonal, as a line: the mean cosine of all pairs of rows that are that many "
               "positions apart.")
    if table_trained:
        rows_never_trained(loaded, length)


def rope_kernel_section(loaded: LoadedModel, length: int) -> None:
    """RoPE adds no rows: its kernel, the cosine of one vector turned to two positions."""
    config = loaded.config
    head_dim = config.head_size
    kernel_map, kernel_line, kernel_reading = rope_kernel(length, head_dim, base=config.rope_base, scheme=config.position,
                                                          share=config.rope_share)
    chart(kernel_map, name="similarity-position-map", model=loaded, key="sim_positions")
    st.caption(similarity.rope_kernel_map_sentence(label=loaded.model.scheme.label, head_dim=head_dim,
                                                   base=config.rope_base, scheme=config.position,
                                                   share=config.rope_share, layer_bases=config.layer_bases))
    chart(kernel_line, name="similarity-kernel-by-offset", model=loaded, key="sim_kernel")
    st.caption(kernel_reading)


def nearest_and_path(loaded: LoadedModel, length: int) -> None:
    """The nearest rows of one position, and the PCA path of the rows."""
    table = similarity.position_rows(loaded.model, length)
    position = st.number_input("Nearest positions of position", min_value=0, max_value=len(table) - 1,
                               value=min(10, len(table) - 1), key=f"sim_position_{len(table)}")
    st.dataframe(similarity.nearest_positions(table, int(position), k=min(NEAREST_POSITIONS, len(table) - 1)),
                 hide_index=True, key="sim_position_neighbours")
    distance = band_structure(loaded, length)["neighbour_distance"]
    st.caption(f"Among the first {len(table)} position rows (the slider above); "
               f"{similarity.neighbour_sentence(distance, len(table), indexed=not loaded.config.random_positions)}.")
    st.subheader("The path of the position rows (PCA)")
    if len(table) < 4:
        st.info("PCA needs at least 4 positions; raise the slider above.")
        return
    flat, solid, reading = position_pca(loaded, length)
    left, right = st.columns(2)
    chart(flat, name="similarity-pca-2d", where=left, model=loaded, key="sim_pca2")
    # closed, the 3-D view sends nothing: a WebGL scene costs a browser without a GPU ~0.8 s per slider step
    solid_box = right.expander("The same path in 3-D (drag to turn it)", key="sim_pca3_open", on_change="rerun")
    if solid_box.open:
        chart(solid, name="similarity-pca-3d", where=solid_box, model=loaded, key="sim_pca3")
    st.caption(reading)


@st.fragment
def positions_section(loaded: LoadedModel) -> None:
    """The position rows: the slider and everything it drives (no sentence in here)."""
    scheme = loaded.model.scheme
    st.subheader("Position × position")
    if not scheme.adds_rows and not scheme.shows("rotation"):  # nothing here depends on a length: no slider
        where = embeddings.where_it_acts(scheme)
        st.info(where.sentence, icon=":material/info:")
        st.page_link(where.page, label=where.link, icon=where.icon)
        st.info(NO_ROWS, icon=":material/info:")
        return
    length = position_slider(loaded)
    if scheme.adds_rows:
        position_maps_section(loaded, length)
        nearest_and_path(loaded, length)
    else:
        rope_kernel_section(loaded, length)
        st.info(NO_ROWS, icon=":material/info:")
