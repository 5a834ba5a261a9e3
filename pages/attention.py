"""Positions in attention: every scheme that acts inside attention, each through the views it shows
(a rotation of queries and keys, a bias against distance, counts from the content). A scheme that
acts elsewhere is said in one line, and the two with no weights (RoPE, ALiBi) can be tried on any model."""
import streamlit as st

from lpos import ui
from lpos.analysis.attention import in_attention_sentence
from lpos.tokenizer import visible
from lpos.ui import attention

selection = ui.selection()
st.title("Positions in attention")
st.caption(in_attention_sentence())
ids = ui.usable_ids(selection)
tokens = [visible(t) for t in selection.model.tokenizer.token_strings(ids)]  # the model's own tokens

attention.attention_views(selection.model, ids, tokens)
