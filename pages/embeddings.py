"""Embeddings: the sentence's token rows, position rows and their sum."""
import streamlit as st

from lpos import figures, ui
from lpos.analysis.embeddings import lookalike_tokens, repeated_tokens, rows_frame

selection = ui.selection()
st.title("Token row + position row = what the model reads")
st.caption(
    "Each token id picks one row of the token table (a lookup, not a multiplication). Schemes that add "
    "positions pick a second row by position and add the two; that sum is the input to the first block."
)
ids = ui.usable_ids(selection)
view = ui.embedding_view(selection, ids)

st.plotly_chart(figures.token_chips(view), key="chips")
if not selection.model.trained:
    st.caption("Untrained model: no training counts, every row is its random initial value.")

st.subheader("Same word, two positions")
repeats = repeated_tokens(view)
for repeat in repeats:
    i, j = repeat.positions
    if view.position_rows is None:
        st.info(f"“{repeat.token}” at positions {i} and {j}: identical token rows, and with {selection.scheme!r} "
                f"nothing is added, so the summed rows are identical too (cosine {repeat.summed_cosine:.4f}). "
                "This scheme tells them apart only inside attention, if at all.")
    else:
        st.success(f"“{repeat.token}” at positions {i} and {j}: identical token rows (largest difference "
                   f"{repeat.token_rows_max_difference:g}), different summed rows: cosine similarity "
                   f"{repeat.summed_cosine:.4f}. The position row is what tells them apart.")
if not repeats:
    pairs = lookalike_tokens(view)
    if pairs:
        i, j = pairs[0]
        st.info(f"No token occurs twice. “{view.tokens[i]}” (id {view.ids[i]}) and “{view.tokens[j]}” "
                f"(id {view.ids[j]}) read as the same word, but GPT-2 keeps case and the leading space, so they "
                "are different tokens with different rows. Try “The dog saw the cat and the man”.")
    else:
        st.info("No token occurs twice in this sentence. Try “The dog saw the cat and the man”.")

st.subheader("The three tables")
st.plotly_chart(figures.embedding_heatmaps(view, scheme=selection.scheme), key="heatmaps")
if view.position_rows is None:
    st.caption({
        "rope": "RoPE rotates queries and keys inside attention: see the RoPE & ALiBi page.",
        "alibi": "ALiBi biases attention scores by distance: see the RoPE & ALiBi page.",
        "none": "With no positions, attention cannot tell the order of earlier tokens: see the order-blindness page.",
    }[selection.scheme])

with st.expander("The raw numbers"):
    frame = rows_frame(view)
    st.dataframe(frame.iloc[:, :12], hide_index=True)
    st.caption(f"{len(frame)} rows × {frame.shape[1] - 4} dimensions; the download has every column.")
    left, right = st.columns(2)
    left.download_button("Download all numbers (CSV)", lambda: frame.to_csv(index=False), file_name="embeddings.csv",
                         mime="text/csv", key="download_csv")
    heatmaps = figures.embedding_heatmaps(view, scheme=selection.scheme)
    right.download_button("Download the figure (HTML, works offline)",
                          lambda: heatmaps.to_html(include_plotlyjs=True), file_name="embeddings.html",
                          mime="text/html", key="download_figure")
