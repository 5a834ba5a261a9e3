"""Inside the model: where position lives, layer by layer, and what each head does with it."""
import streamlit as st

from lpos import ui
from lpos.ui import inside
from lpos.ui.heads import head_portraits_tab
from lpos.ui.probes import where_position_lives
from lpos.ui.selection import scheme_models
from lpos.ui.streaming import sink_tested

selection = ui.selection()
st.title("Inside the model")
st.caption("The other pages show position going in: rows added, queries rotated, scores biased or counted. This one "
           "looks at where it ends up: in which layer a linear read-out finds it, what each attention head does with it, and "
           "whether the models lean on the first token as an attention sink. All of it runs on held-out text, not "
           "the sidebar sentence: a probe needs thousands of tokens.")

chosen = inside.text_choice(selection.model)  # encoded with the model's own tokenizer
models = scheme_models(selection)
sidebar_model = next(m for m in models if m.scheme == selection.scheme)

where, portraits_tab, sink_tab = st.tabs(["Where position lives", "Head portraits", "The sink, tested"],
                                         key="inside_tab", on_change="rerun")
with where:
    if where.open:
        where_position_lives(selection, chosen, sidebar_model)
with portraits_tab:
    if portraits_tab.open:
        head_portraits_tab(selection, models, chosen, sidebar_model)
with sink_tab:
    if sink_tab.open:
        sink_tested(selection, models, chosen, sidebar_model)
