"""Embeddings: the sentence's token rows, position rows and their sum."""
import streamlit as st

from lpos.analysis.embeddings import (never_seen, position_share, repeat_sentence, repeated_tokens, rows_frame,
                                     untrained_rows_sentence)
from lpos.figures.embeddings import (PANEL_NAMES, REPEAT_EXAMPLE, heatmaps_title, lookalike_difference,
                                     lookalike_pair, repeat_example, unseen_caption)
from lpos.ui import embeddings
from lpos.ui.coverage import trained_rows
from lpos.ui.guards import usable_ids
from lpos.ui.text import literal
from lpos.ui.selection import selection as current_selection
from lpos.ui.export import chart

selection = current_selection()
scheme = selection.model.model.scheme
st.title("Token row + position row = what the model reads")
st.caption(
    "Each token id picks one row of the token table (a lookup, not a multiplication). Schemes that add "
    "positions pick a second row by position and add the two; that sum is the input to the first block."
)
ids = usable_ids(selection)
view = embeddings.embedding_view(selection.model, ids)

chips = embeddings.token_chips(selection.model, ids)
with st.container(key="chips"):  # a keyed place: the chips keep their spot across reruns
    st.html(chips)  # token text escaped in token_chips_html; st.html also sanitises (DOMPurify), no iframe
unseen = never_seen(view)
if not selection.model.trained:
    st.caption("Untrained model: no training counts, every row is its random initial value. "
               "Pick a trained model in the sidebar to see how often each token occurs in its training text.")
elif view.counts[0] is None:
    st.caption("This checkpoint carries no per-token training counts: how often each token was trained on is not known "
               "for this model, so the chips show text and id only. The shipped models have them.")
elif unseen:
    st.caption(unseen_caption(view, unseen, literal=literal))
else:
    st.caption("Every token here occurs in the training text. Each chip's second line gives its count, rounded "
               "(rest the pointer on a chip for the exact one).")

st.subheader("Same word, two positions")
repeats = repeated_tokens(view)
for repeat in repeats[:3]:
    said = repeat_sentence(repeat, literal=literal)
    if view.position_rows is None:
        st.info(f"{said} " + (f"{scheme.label} tells them apart only inside attention." if scheme.in_attention else
                              "Only what comes before each copy can tell them apart: nothing says where a token sits."))
    else:
        st.success(said)
if len(repeats) > 3:
    st.caption(f"{len(repeats) - 3} more tokens occur more than once; the same holds for each of them.")
if not repeats:  # what is said of the tokens is computed from the model's own tokenizer, GPT-2's or not
    example = repeat_example(selection.model.tokenizer)
    try_it = (f"Try “{REPEAT_EXAMPLE}”: in the model's tokens, “{literal(example[0])}” occurs "
              f"{'twice' if example[1] == 2 else f'{example[1]} times'}." if example
              else "Type a sentence with a word in it twice.")
    pair = lookalike_pair(view)
    if pair:
        i, j = pair
        a, b = view.tokens[i], view.tokens[j]
        st.info(f"No token occurs twice. “{literal(a)}” (id {view.ids[i]}) and “{literal(b)}” (id {view.ids[j]}) "
                f"read as the same {'letter' if len(a.strip('␣')) == 1 else 'word'}, but they differ "
                f"{lookalike_difference(a, b)}, so the model's tokenizer, {view.tokenizer_name}, gives them different "
                "ids, and different ids pick different rows. " + try_it)
    else:
        st.info("No token occurs twice in this sentence. " + try_it)

st.subheader("The three tables")
st.markdown(f"**{heatmaps_title(view, scheme=selection.model.scheme)}**")
panels = embeddings.embedding_panel_figures(selection.model, ids)
for column, name, panel in zip(st.columns(3, gap="small"), PANEL_NAMES, panels):
    chart(panel, name=f"embeddings-{name}", where=column, model=selection.model, key=f"heatmaps_{name.split()[0]}")  # side by side, stacked on a phone
if view.position_rows is None:
    st.caption(f"With {selection.scheme!r} the summed rows are the token rows: nothing here says where a token sits, "
               "so a repeated token gets the same row at every position.")
    where = embeddings.where_it_acts(scheme)
    st.caption(where.sentence)
    st.page_link(where.page, label=where.link, icon=where.icon)
else:
    share = position_share(view)
    faint = (f" Here the position rows reach only {share:.0%} of the scale's end, so they are nearly white: "
             "small next to the token rows, yet they are what tells positions apart."
             if share is not None and share < 0.25 else "")
    st.caption("One colour scale for all three panels: read a row across to see the position row shift the token "
               "row. Hover any cell for its value." + faint)
    if untrained := untrained_rows_sentence(view, trained_rows=trained_rows(selection.model), model=selection.model.name):
        st.caption(untrained)

with st.expander("The raw numbers", icon=":material/table:"):
    frame = rows_frame(view)
    st.dataframe(frame.iloc[:, :12], hide_index=True)
    st.caption(f"{len(frame):,} rows (position × part) and {frame.shape[1] - 4} dimensions; "
               f"the first 8 dimensions are shown, the download has every column.")
    left, right = st.columns(2)
    # the CSV is small, so it goes with the page; a deferred download (a callable) keeps its button disabled until
    # the server answers, which a busy server may not do for a long while
    left.download_button("Download all numbers (CSV)", frame.to_csv(index=False), file_name="embeddings.csv",
                         mime="text/csv", key="download_csv", icon=":material/download:")
    right.download_button("Download the figure (HTML, works offline)",
                          lambda: embeddings.heatmaps_page(view, scheme=selection.model.scheme),
                          file_name="embeddings.html",
                          mime="text/html", key="download_figure", icon=":material/download:")
