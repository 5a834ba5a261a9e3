"""The lesson's live figures: one per step, each reused from lpos.figures, on the sidebar sentence.

A step about one scheme uses that scheme's shipped model when the sidebar model is trained
(an untrained model of that scheme otherwise), so every step works whatever the sidebar holds.
"""
from __future__ import annotations

import urllib.parse

import plotly.graph_objects as go
import streamlit as st

from lpos import checkpoints
from lpos.analysis import attention, embeddings, lengths, shuffle, similarity, sinusoids, timeline
from lpos.figures.attention import BIAS_COLOURS, matrix_panels, offset_scores_figure
from lpos.figures.embeddings import embedding_heatmaps, token_chips_html
from lpos.figures.lengths import length_curves_figure
from lpos.figures.shuffle import attention_bars, prediction_bars
from lpos.figures.similarity import similarity_heatmaps
from lpos.figures.sinusoids import offset_dot_figure
from lpos.lesson import STEPS
from lpos.tokenizer import encode, token_strings, visible
from lpos.ui import cached_experiments
from lpos.ui.guards import literal
from lpos.ui.models import load_offered
from lpos.ui.state import Selection

PRESETS = ("The dog bit the man.", "The man bit the dog.")  # same tokens, same last token
LESSON_TOKENS = 48  # the lesson draws short sentences; a long paste is cut, with a note


def step_from_url() -> tuple[int, str | None]:
    """The step the URL asks for (1-based) and a notice if the value was refused."""
    raw = st.query_params.get("step", "1")
    if raw.isdigit() and 1 <= int(raw) <= len(STEPS):
        return int(raw), None
    return 1, f"There is no step {raw[:20]!r}; the lesson has steps 1 to {len(STEPS)}, so it starts at 1."


def model_for(selection: Selection, scheme: str | None) -> cached_experiments.SchemeModel:
    scheme = scheme or selection.scheme
    return next(m for m in cached_experiments.scheme_models(selection) if m.scheme == scheme)


def sentence_ids(selection: Selection) -> tuple[list[int], bool]:
    """The sidebar sentence (cut to LESSON_TOKENS), or the first preset when it is empty."""
    ids = selection.ids[:LESSON_TOKENS] or encode(PRESETS[0])
    return ids, len(selection.ids) > LESSON_TOKENS


def shuffle_pair(ids: list[int]) -> tuple[list[int], list[int]]:
    """The sidebar sentence and a shuffle of it, or the two presets when it cannot be shuffled."""
    if len(ids) >= 3 and shuffle.can_shuffle(ids):
        return ids, shuffle.shuffle_earlier(ids, seed=0)
    return encode(PRESETS[0]), encode(PRESETS[1])


def none_shuffle(selection: Selection, ids: list[int]) -> shuffle.ShuffleResult:
    original, shuffled = shuffle_pair(ids)
    return cached_experiments.shuffle_results([model_for(selection, "none")], original, shuffled)[0]


def figure(step: int, selection: Selection) -> tuple[go.Figure | str, str | None]:
    """The live figure of a 1-based step and one sentence of measured numbers to go with it. Step 1's
    figure is the token chips: escaped HTML (lpos.figures.embeddings.token_chips_html), for st.html."""
    ids, cut = sentence_ids(selection)
    tokens = [visible(t) for t in token_strings(ids)]
    note = f"(The lesson uses the first {LESSON_TOKENS} tokens of your text.) " if cut else ""
    scheme_model = model_for(selection, STEPS[step - 1].scheme)
    model = scheme_model.model

    if step == 1:
        view = embeddings.embedding_view(model, ids, counts=embeddings.token_counts(selection.model.meta))
        return token_chips_html(view), note + f"{len(ids)} tokens, so {len(ids)} rows looked up."
    if step in (2, 10):
        result = none_shuffle(selection, ids)
        if step == 2:
            return attention_bars(result, head=0), (
                f"Layer 1 output of the last token moved by {result.attention_change:.1e} under “none”: float rounding.")
        return prediction_bars(result), (
            f"Layer 1 moved by {result.attention_change:.1e}, yet the full model's next-token distribution moved by a "
            f"total variation of {result.distribution_change:.3f} (top-1 {'unchanged' if result.same_top1 else 'changed'}).")
    if step == 3:
        view = embeddings.embedding_view(model, ids)
        repeats = embeddings.repeated_tokens(view)
        said = (f"“{literal(repeats[0].token)}” occurs twice: identical token rows, summed rows with cosine "
                f"{repeats[0].summed_cosine:.3f}." if repeats else
                "No token occurs twice in your sentence; try “The dog saw the cat and the man”.")
        return embedding_heatmaps(view, scheme="learned"), note + said
    if step == 4:
        rows = model.config.block_size
        try:
            model.check_length(rows + 1)
            said = None
        except ValueError as error:
            said = f"At {rows + 1} tokens the model answers: “{error}”"
        return length_curves_figure(cached_experiments.shipped_loss_tables(), train_length=rows), said
    if step == 5:
        width = model.config.n_embd
        frame = sinusoids.offset_dot_products(width, starts=[0, 20, 60], max_offset=100)
        return offset_dot_figure(frame), f"Width {width}: three starting positions, one curve."
    if step == 6:
        queries, keys = attention.queries_and_keys(model, ids, layer=0, rotate=False)  # (nh, T, hs)
        frame = attention.offset_scores(queries[0, -1], keys[0, -1], offsets=[0, 1, 4, 16], length=64)
        spread = frame.groupby("offset")["score"].agg(lambda s: s.max() - s.min()).max()
        return offset_scores_figure(frame), f"Largest change of a score along its line: {spread:.1e}."
    if step == 7:
        effect = attention.alibi_effect(model, ids, layer=0)
        heads = [0, len(effect.slopes) - 1]
        panels = [(f"head {h}: slope {effect.slopes[h]:.3g}", effect.bias[h]) for h in heads]
        low = float(min(effect.bias[h].min() for h in heads))
        return matrix_panels(panels, tokens=tokens, title="ALiBi's bias: minus slope × distance",
                             value_name="bias", zmin=min(low, -1e-6), zmax=0.0, colorscale=BIAS_COLOURS), (
            f"Slopes from {effect.slopes.max():.3g} (steepest head) to {effect.slopes.min():.3g} (gentlest).")
    if step == 8:
        trained = similarity.position_rows(model, model.config.block_size)
        meta = load_offered(scheme_model.key)[1] if scheme_model.key in checkpoints.available() else {}
        start = timeline.starting_rows(meta, len(trained))
        if start is None:
            start, start_title = similarity.initial_position_rows(len(trained), model.config.n_embd), "a random table"
        else:
            start_title = "the same table at step 0"
        maps = [similarity.similarity_map(trained, title=f"learned table: {scheme_model.label}"),
                similarity.similarity_map(start, title=start_title)]
        structure = timeline.table_structure(trained)
        return similarity_heatmaps(maps, axis_title="position"), (
            f"Neighbouring positions: mean cosine {structure['cosine_at_1']:.2f}; 64 apart: "
            f"{structure.get('cosine_at_64', float('nan')):.2f}. The 10 most similar rows of a row sit "
            f"{structure['neighbour_distance']:.1f} positions away (about 42 for random rows). "
            "The Training timeline page shows the band forming step by step.")
    tables = cached_experiments.shipped_loss_tables()
    trained_at = model.config.block_size  # the shipped models train at their context length
    return length_curves_figure(tables, train_length=trained_at), (
        lengths.length_reading(tables, train_length=trained_at)
        + "\n\nHow a RoPE model is made to read longer text without retraining (PI, NTK-aware, YaRN), measured: "
        f"[Stretching the context]({same_view('stretch')}).")


def same_view(path: str) -> str:
    """A link to another page that opens with this sidebar (a Markdown link opens a new tab)."""
    shared = {k: st.query_params[k] for k in ("text", "scheme", "model") if k in st.query_params}
    return f"{path}?{urllib.parse.urlencode(shared)}" if shared else path


def presenter_css() -> str:
    """Static CSS for presenter mode (no user content): no sidebar or toolbar, large text."""
    return """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], header[data-testid="stHeader"] {display: none;}
[data-testid="stMainBlockContainer"] {max-width: 100%; padding: 1.5rem 2.5rem;}
[data-testid="stMain"] p, [data-testid="stMain"] li {font-size: 1.55rem; line-height: 1.45;}
[data-testid="stMain"] h1 {font-size: 3rem;}
[data-testid="stMain"] .lpos-chips {font-size: 1.55rem;}
</style>"""

