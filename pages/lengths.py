"""Length extrapolation: trained at 128 tokens, evaluated up to 1024. Which schemes carry on?"""
import streamlit as st

from lpos import ui
from lpos.analysis.lengths import (curve_caption, curve_reading, length_reading, output_count, rotation_variants_reading,
                                   training_length, uniform_guess_sentence, window_rows, wrong_tokenizer_sentence)
from lpos.corpus import story
from lpos.positions import SCHEMES
from lpos.ui import coverage, lengths
from lpos.ui.selection import MAX_TOKENS
from lpos.ui.export import chart

PRESS_2021 = ("Press, Smith & Lewis (2021), “Train Short, Test Long: Attention with Linear Biases Enables Input "
              "Length Extrapolation”, [arXiv:2108.12409](https://arxiv.org/abs/2108.12409).")

selection = ui.selection()
st.title("Train short, test long")
st.caption(
    f"{lengths.shipped_training_windows()}Here they read longer windows than they ever saw: "
    "a scheme that extrapolates keeps its loss; one that does not gets worse, or cannot run at all."
)

st.subheader("Loss against evaluation length, from the model cards")
cards = lengths.cards_at_one_length()
if cards is None:
    st.info("No shipped checkpoint is installed yet, so there are no model cards to plot. The live view below "
            "works with any model.", icon=":material/hourglass_empty:")
else:
    tables = cards.tables
    plot_column, reading_column = st.columns([3, 2])
    chart(lengths.length_curves(tables, train_length=cards.train_length, unigram=cards.unigram),  # the cards held: no file read again
          recipe=lengths.length_curves_recipe(list(tables), train_length=cards.train_length, unigram=cards.unigram),
          name="extrapolation-length-curves", where=plot_column, key="length_curves")
    plot_column.caption(f"Left of the dashed line the models read no more than they were trained on ({cards.train_length:,} "
                        f"tokens); right of it, up to {cards.longest / cards.train_length:g}× more.\n\nA line that climbs fails "
                        f"to extrapolate.{cards.table_ends()}{cards.left_out_sentence()}")
    reading_column.markdown("**What the numbers say**")
    reading_column.markdown(length_reading(tables, train_length=cards.train_length))
    reading_column.caption(f"Measured on held-out stories, non-overlapping windows. Reference: {PRESS_2021}")
    if variants := rotation_variants_reading(tables, train_length=cards.train_length):
        st.markdown("**Today's RoPE practice, side by side.** These schemes rotate only part of what RoPE rotates: "
                    "does that cost or buy anything here?\n\n" + variants)
        st.caption("One model per scheme, trained once with one seed: how far another seed would move these numbers "
                   "is not measured here.")
    missing = [s for s in SCHEMES if s not in tables and s not in cards.left_out]
    if missing:
        st.caption(f"Not shipped yet: {', '.join(missing)}.")

short, full = coverage.short_window_model(selection.model), coverage.full_window_model()
if short is not None and full is not None:
    st.subheader("The table's other limit: rows that never trained")
    found = coverage.position_losses(short, full, opened=selection.model)
    chart(found.figure, recipe=found.recipe, name="extrapolation-position-loss", model=selection.model,
          key="coverage_position_loss")
    st.markdown(found.reading)
    limit = coverage.trained_rows(short)
    st.caption(f"Mean loss at each position of {full.config.block_size}-token windows of {found.text}. "
               f"{short.label} has all {short.config.block_size} rows, but it trained on windows of at most "
               f"{limit} tokens: from position {limit} on it adds rows that never received a gradient, still its "
               "random starting rows, only shrunk by weight decay.")


def live_text() -> list[int]:
    """The long text's tokens in the model's own tokenizer: the built-in story or a pasted one, at most MAX_TOKENS;
    stops the page with what to do when there are fewer than two."""
    encode = selection.model.tokenizer.encode_known  # the model's own tokens; characters it lacks are left out
    sources = {"story": f"The built-in story ({len(encode(story())[0]):,} tokens)", "paste": "Your own text"}
    source = st.radio("Text", list(sources), format_func=sources.get, key="extrapolation_source", horizontal=True)
    text = story() if source == "story" else st.text_area(
        "Paste a long text (English prose works best)", key="extrapolation_text", height=150, max_chars=20_000)
    ids, dropped = encode(text)
    if dropped:
        st.caption(selection.model.tokenizer.left_out_sentence(text, of="this text"))
    if len(ids) < 2:
        st.info("The live view needs at least two tokens: one to read and one to predict. "
                + ("Paste some text above." if not ids else "Paste a longer text above."), icon=":material/edit:")
        st.stop()
    if len(ids) > MAX_TOKENS:
        st.caption(f"Scoring the first {MAX_TOKENS:,} of {len(ids):,} tokens.")
    return ids[:MAX_TOKENS]


@st.fragment
def live() -> None:
    """The long text's own controls and the scoring they drive (the sidebar sentence is not used here)."""
    st.subheader("Live: loss along one long text")
    ids = live_text()
    model = selection.model
    curve = lengths.loss_curve(model, ids)
    trained_at = training_length(model.meta, model.model)
    plot_column, reading_column = st.columns([3, 2])
    chart(lengths.token_loss_chart(model, ids, train_length=trained_at), name="extrapolation-token-losses",
          where=plot_column, model=model, key="token_losses")
    plot_column.caption(curve_caption(curve, model.model, train_length=trained_at))
    reading_column.markdown(f"**{selection.scheme} · {model.label}**")
    if model.trained and not model.tokenizer.is_gpt2 and (doubt := wrong_tokenizer_sentence(
            curve, model.model, source=str(model.meta.get("source", "")))):
        st.warning(doubt, icon=":material/warning:")
    reading_column.markdown(curve_reading(curve, train_length=trained_at,
                                          baseline=lengths.window_baseline(model, ids, window=trained_at),
                                          rows=window_rows(model.model, trained_at)))
    if not model.trained:
        reading_column.caption(f"An untrained model guesses uniformly over its {output_count(model.model):,} tokens, so its "
                               f"loss sits near {uniform_guess_sentence(model.model)} "
                               "everywhere: pick a trained model to see a scheme fail.")

live()
