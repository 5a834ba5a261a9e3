"""Stretching the context: RoPE scaling (PI, NTK-aware, YaRN, Llama 3's bands) measured on the selected RoPE model
(a Llama, say) or else the shipped one, writing past the training length, and "absolute vs relative" as a shift of every position."""
import streamlit as st

from lpos import ui
from lpos.analysis.stretch import trained_sentence
from lpos.checkpoints.families import trained_scaling_sentence
from lpos.ui.scaling import rope_length, rope_model, scaling_sections
from lpos.ui.stretch import shift_section, write_past_the_wall

PAPERS = ("Chen et al. (2023), [Position Interpolation](https://arxiv.org/abs/2306.15595); bloc97 (2023), NTK-aware "
          "scaling; Peng et al. (2023), [YaRN](https://arxiv.org/abs/2309.00071); Grattafiori et al. (2024), "
          "[The Llama 3 Herd of Models](https://arxiv.org/abs/2407.21783) (its frequency bands).")

selection = ui.selection()
rope = rope_model(selection.model)
st.title("Stretching the context")
trained_on = (trained_sentence(rope.label, train_length=rope_length(rope), base=rope.config.rope_base)
              if rope is not None else "A RoPE model is trained on windows of one length")
st.caption(f"{trained_on}. Four published methods rescale its rotations so "
           "that longer text lands on angles it has seen, each to a different degree (section 2). Position Interpolation, "
           "YaRN and Llama 3's bands are published with further training at the longer length; NTK-aware scaling was "
           "proposed without it. This page applies all four without any fine-tuning and measures them on the real model, "
           f"not drawn from formulas. {PAPERS}")

if rope is not None and (own := trained_scaling_sentence(rope.config)):  # a config's rope_scaling (Qwen's yarn)
    st.caption(own)
scaling_sections(rope, selection)
write_past_the_wall()
shift_section(selection)
