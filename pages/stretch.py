"""Stretching the context: RoPE scaling (PI, NTK-aware, YaRN) measured on the selected RoPE model
(a Llama, say) or else the shipped one, writing past the training length, and "absolute vs relative" as a shift of every position."""
import streamlit as st

from lpos import ui
from lpos.analysis.stretch import trained_sentence
from lpos.ui.scaling import rope_length, rope_model, scaling_sections
from lpos.ui.stretch import shift_section, write_past_the_wall

PAPERS = ("Chen et al. (2023), [Position Interpolation](https://arxiv.org/abs/2306.15595); bloc97 (2023), NTK-aware "
          "scaling; Peng et al. (2023), [YaRN](https://arxiv.org/abs/2309.00071).")

selection = ui.selection()
rope = rope_model(selection.model)
st.title("Stretching the context")
trained_on = (trained_sentence(rope.label, train_length=rope_length(rope), base=rope.model.config.rope_base)
              if rope is not None else "A RoPE model is trained on windows of one length")
st.caption(f"{trained_on}. Three published methods rescale its rotations so "
           "that longer text lands on angles it has seen, each to a different degree (section 2). Position Interpolation and YaRN are published with a short "
           "fine-tune at the longer length; NTK-aware scaling was proposed without one. This page applies all three "
           f"without any fine-tuning and measures them on the real model, not drawn from formulas. {PAPERS}")

scaling_sections(rope, selection)
write_past_the_wall()
shift_section(selection)
