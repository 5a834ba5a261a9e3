"""Order blindness: shuffle every token but the last and see which schemes notice."""
import streamlit as st

from lpos import ui
from lpos.ui.shuffle import experiment

selection = ui.selection()
st.title("Shuffle the earlier tokens: who notices?")
st.caption(
    "Keep the last token, permute every token before it, and compare what the last position computes. "
    "Attention without positions is a weighted average over a set of tokens, and a set has no order."
)
experiment(selection)
