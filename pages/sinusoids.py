"""Sinusoids: the fixed table of sines and cosines, its frequency bands, and why only distance matters."""
import streamlit as st

from lpos import ui
from lpos.analysis import sinusoids as sinusoid_words
from lpos.analysis.counts import listed
from lpos.positions import schemes_with
from lpos.positions.sinusoidal import SINUSOID_SCALE
from lpos.ui import sinusoids
from lpos.ui.export import chart

selection = ui.selection()
st.title("Sinusoids: a position table nobody trained")
st.caption(
    "Row t of the table holds, for every pair of columns i, sin(t·wᵢ) and cos(t·wᵢ) with wᵢ = base^(−2i/width). "
    "Nothing is learned: any length, any width, the same numbers every time."
)


@st.fragment
def explorer() -> None:
    """The table's own controls and every figure they drive: moving one reruns only this."""
    left, middle, right = st.columns(3)
    width = left.slider("Width (columns, even)", min_value=8, max_value=1024, value=128, step=2, key="sin_width")
    length = middle.slider("Length (positions)", min_value=1, max_value=4096, value=128, key="sin_length")
    base = right.number_input("Base", min_value=2.0, max_value=1e9, value=10000.0, step=1000.0, key="sin_base",
                              help=sinusoid_words.base_help(width, base=st.session_state.get("sin_base", 10000.0)))

    st.subheader("The table")
    table, _ = sinusoids.sinusoid_table(length, width, float(base),
                                                       title=f"Sinusoidal table: {length} positions × {width} columns")
    chart(table, name="sinusoids-table", key="sin_table")
    st.caption(sinusoid_words.table_sentence(length, width, base=float(base)))

    st.subheader("Frequency bands")
    pairs_available = list(range(width // 2))
    default_pairs = sorted({0, width // 16, width // 8, width // 4 - 1} & set(pairs_available))
    pairs = st.multiselect("Column pairs to draw", pairs_available, default=default_pairs, key=f"sin_pairs_{width}",
                           max_selections=8, help="Pair i is columns 2i (sin) and 2i+1 (cos).")
    if pairs:
        chart(sinusoids.sinusoid_bands(length, width, tuple(pairs), float(base)), name="sinusoids-bands", key="sin_bands")
        st.caption("Each pair is a clock hand turning at its own speed: sin is one coordinate, cos the other.\n"
                   + sinusoid_words.bands_sentence(length, width, pairs=pairs, base=float(base)))
    else:
        st.info("Pick at least one column pair above to draw its sin and cos.")
    waves, slowest = sinusoids.sinusoid_wavelengths(width, float(base))
    head_columns = selection.model.config.head_size
    chart(waves, name="sinusoids-wavelengths", key="sin_wavelengths")
    st.caption(f"Pair 0 repeats every 2π ≈ 6.28 positions; the last pair every {slowest:,.0f} "
               "positions (2π·base^((width−2)/width)).\nThe wavelengths are evenly spaced on a log scale: a geometric sequence. "
               + sinusoid_words.rope_sentence(width, head_columns, base=float(base), **rotating_model(selection))
               + " [Stretching the context](stretch) shows how scaling methods move them past a training length.")
    distance(width, float(base))


def rotating_model(selection) -> dict:
    """The sidebar model's RoPE bases (one per layer) and its rotation for the RoPE sentence, when it rotates."""
    model = selection.model.model
    if not model.scheme.shows("rotation"):
        return {}
    return dict(model_bases=model.config.layer_bases or (model.config.rope_base,), model_rotation=model.scheme)


@st.fragment
def distance(width: int, base: float) -> None:
    """The distance section's own inputs (the width and base come from the explorer)."""
    st.subheader("Only the distance matters")
    columns = st.columns(4)
    starts = [columns[i].number_input(f"t{i + 1}", min_value=0, max_value=4096, value=value, step=1, key=f"sin_t{i + 1}")
              for i, value in enumerate((0, 100, 1000))]
    max_offset = columns[3].slider("Largest distance k", min_value=1, max_value=1024, value=128, key="sin_max_offset")
    dots = sinusoids.offset_dots_recipe(width, tuple(int(s) for s in starts), max_offset, float(base))
    chart(dots, name="sinusoids-distance-dot-products", key="sin_offset_dot")
    st.caption("row t · row t+k = Σᵢ cos(k·wᵢ): the start t cancels, so the three curves lie on top of each other.\n"
               "Attention does not see this raw dot product: scores pass through the learned W_q and W_k first. "
               "Vaswani et al. (2017) argue from a different fact: each pair of row t+k is row t's pair turned by the "
               "angle k·wᵢ, so PE(t+k) is a fixed linear map (a rotation) of PE(t), the same for every t. "
               "A layer can therefore learn one map for “k tokens back”.")


explorer()

st.subheader("This model's table")
config, scheme = selection.model.config, selection.model.model.scheme
if not scheme.shows("sinusoids"):
    st.info(f"This model adds no sinusoidal table: its scheme, {scheme.name}, {scheme.acts}. Choose "
            f"{listed(schemes_with('sinusoids'), 'or')} in the sidebar to see the rows it adds to "
            "your sentence.", icon=":material/info:")
else:
    ids = ui.usable_ids(selection)
    shown = min(max(2 * len(ids), 64), 4096)
    model_table, _ = sinusoids.sinusoid_table(shown, config.n_embd, 10000.0, highlight_rows=len(ids),
                                                   title=f"The {config.n_embd}-column table this model adds, "
                                                         f"drawn at ±1 (added × {SINUSOID_SCALE:.3f})")
    chart(model_table, name="sinusoids-model-table", model=selection.model, key="sin_model_table")
    boxed = "the boxed row 0 is the row added to its token row" if len(ids) == 1 else \
        f"the boxed rows 0–{len(ids) - 1} are the rows added to its token rows"
    st.caption(f"Your sentence has {len(ids)} token{'s' if len(ids) != 1 else ''}: {boxed}, "
               f"each multiplied by {SINUSOID_SCALE:.4f} first, so that a row has the norm of an initial token row "
               "(at ±1 the table would drown the token rows). The Embeddings page shows the rows as added.\n"
               "A longer sentence just uses more rows: the table never runs out.")
