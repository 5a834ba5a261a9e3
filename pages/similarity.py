"""Similarity: which positions and tokens look alike to the model, and the path training carves."""
import streamlit as st

from lpos import ui
from lpos.tokenizer import visible
from lpos.ui import embeddings, similarity, token_similarity

selection = ui.selection()
st.title("Similarity: which rows look alike")
st.caption("Cosine similarity compares the direction of two rows: 1 = same direction, 0 = unrelated, −1 = opposite. "
           "Random rows are all near 0 to each other; training pulls related rows together.")

similarity.positions_section(selection.model)

ids = ui.usable_ids(selection)
tokenizer = selection.model.tokenizer  # the model's own: a character model's chips are characters
tokens = [visible(t) for t in tokenizer.token_strings(ids)]
view = embeddings.embedding_view(selection.model, ids)

token_similarity.token_map_section(selection, view, tokens)
token_similarity.neighbours_section(selection.model, ids, tokens)
