"""Training timeline: replay what the shipped model kept while it trained, step by step."""
import streamlit as st

from lpos import ui
from lpos.analysis.counts import listed
from lpos.analysis.coverage import timeline_coverage_reading
from lpos.analysis.timeline import evaluation_rows_sentence, neighbours_at
from lpos.figures.timeline import ANIMATION_CELLS
from lpos.positions import SCHEMES, schemes_with
from lpos.ui import coverage
from lpos.ui.timeline import animation, band_captions, model_timeline, step_figures, timeline_chart
from lpos.ui.export import chart

selection = ui.selection()
st.title("Training timeline: watch the model learn")
st.caption("While it trained, each shipped model kept 16 snapshots, from step 0 (random weights) to its last step, "
           "spaced evenly on a log scale because most change happens early. Move the step to see what it knew then.")

found = model_timeline(selection.model)
if found is None:
    kind = "An untrained model" if not selection.model.trained else f"{selection.model.label}"
    st.info(f"{kind} has no training timeline: only the shipped models kept snapshots while they trained. "
            "Pick a shipped model in the sidebar (any scheme).", icon=":material/history:")
    st.stop()
timeline, maps, views = found.timeline, found.maps, found.views
limit = coverage.trained_rows(selection.model) if timeline.position_kind == "table" else None


def loss_and_maps(index: int, figures) -> None:
    """The held-out loss so far, and the position map with its band at this snapshot."""
    timeline_chart(figures, "loss", selection.model, key="timeline_loss")
    st.caption(f"Loss on the first {timeline.eval_tokens:,} held-out TinyStories tokens, at windows of "
               f"{maps.shape[-1]} tokens; the model card's loss is over all held-out tokens.")
    left, right = st.columns(2)
    timeline_chart(figures, "position-map", selection.model, where=left, key="timeline_map")
    timeline_chart(figures, "band", selection.model, where=right, key="timeline_band")
    if timeline.position_kind == "table" and (rows_kept := evaluation_rows_sentence(selection.model.model, maps.shape[-1])):
        left.caption(rows_kept)
    for line in band_captions(found, selection.model, index, limit=limit):
        right.caption(line)


def probe_word(index: int, figures) -> None:
    """A probe word's nearest tokens, and the repeated word's copies, at this snapshot."""
    step = timeline.steps[index]
    st.subheader("Nearest tokens of a probe word")
    word = st.selectbox("Probe word", timeline.probe_words, key="timeline_word")
    left, right = st.columns([1, 2])
    left.dataframe(neighbours_at(timeline, word, index, tokenizer=selection.model.tokenizer), hide_index=True,
                   key="timeline_neighbours")
    left.caption(f"By cosine of token rows, among the tokens the model was trained on, at step {step}. "
                 "At step 0 the neighbours are random; related words move together as training goes on.")
    timeline_chart(figures, "repeated-token", selection.model, where=right, key="timeline_repeated")
    right.caption(f"“{timeline.repeated_word}” appears {timeline.repeated_cos.shape[-1]} times in the probe sentence. "
                  "Its token rows are identical; what enters the first block is token + position, so the copies' cosine "
                  f"(here {views.repeated['cosine'][index]:.3f} at step {step}) is below 1 only for schemes that add "
                  f"position rows ({listed(list(schemes_with('rows')))}), and exactly 1 for "
                  f"{listed([name for name in SCHEMES if name not in schemes_with('rows')])}.")


def first_layer_attention(index: int, figures) -> None:
    st.subheader("First-layer attention on the probe sentence")
    for head in range(figures.heads):  # two heads a row; a phone stacks them
        if head % 2 == 0:
            row = st.columns(2, gap="small")
        timeline_chart(figures, f"attention-head-{head + 1}", selection.model, where=row[head % 2],
                       key=f"timeline_attention_{head}")
    st.caption("Rows are the attending token, columns the tokens it reads; each row sums to 1. "
               + views.attention[index])


@st.fragment
def step_view() -> None:
    step = st.select_slider("Training step", options=timeline.steps, value=timeline.steps[-1], key="timeline_step",
                            help="The 16 snapshots. Step 0 is the model before its first update.")
    index = timeline.steps.index(step)
    figures = step_figures(selection.model, index)
    for line in views.reading:
        st.markdown(f"- {line}")
    if limit is not None:
        st.markdown(f"- {timeline_coverage_reading(timeline.steps, timeline.position_rows, limit)}")
    loss_and_maps(index, figures)
    if "bias" in figures.figures:
        st.subheader("The learned bias forming")
        timeline_chart(figures, "bias", selection.model, key="timeline_bias")
        st.caption(f"What the first layer adds to each attention score, by how far back the key sits, for queries at "
                   f"a few positions (a line per head and query). {views.bias_reading[index]}")
    probe_word(index, figures)
    first_layer_attention(index, figures)


step_view()

if st.toggle("Play the whole run in the browser", key="timeline_play",
             help="All 16 maps as an animation with its own play button; nothing is recomputed while it plays."):
    played, recipe = animation(selection.model)
    chart(played, recipe=recipe, name="timeline-position-map-animation", model=selection.model, key="timeline_animation")
    block = -(-maps.shape[-1] // ANIMATION_CELLS)
    if block > 1:
        st.caption(f"Each cell of the animation averages {block}×{block} positions, so the diagonal cells mix a row's "
                   f"cosine 1 with itself and its neighbours' lower cosines: they read below 1.")
