"""Stretching the context: RoPE scaling (PI, NTK-aware, YaRN) measured on the selected RoPE model
(a Llama, say) or else the shipped one, writing past the training length, and "absolute vs relative" as a shift of every position."""
import math

import pandas as pd
import streamlit as st

from lpos import checkpoints, ui
from lpos.analysis import generate, stretch
from lpos.analysis.lengths import output_count
from lpos.positions import SCHEMES, YARN_BETA_FAST, YARN_BETA_SLOW, yarn_ramp
from lpos.tokenizer import encode
from lpos.ui import stretch as views
from lpos.ui.models import label, load_offered
from lpos.ui.selection import MAX_TOKENS, scheme_models
from lpos.ui.export import chart

PAPERS = ("Chen et al. (2023), [Position Interpolation](https://arxiv.org/abs/2306.15595); bloc97 (2023), NTK-aware "
          "scaling; Peng et al. (2023), [YaRN](https://arxiv.org/abs/2309.00071).")

selection = ui.selection()
rope = views.rope_model(selection.model)
st.title("Stretching the context")
trained_on = (f"{rope.label} was trained on {views.rope_length(rope):,}-token windows (RoPE base "
              f"{rope.model.config.rope_base:,g})" if rope is not None else "A RoPE model is trained on windows of one length")
st.caption(f"{trained_on}. Three published methods rescale its rotations so "
           "that longer text lands on angles it has seen, each to a different degree (section 2). Position Interpolation and YaRN are published with a short "
           "fine-tune at the longer length; NTK-aware scaling was proposed without one. This page applies all three "
           f"without any fine-tuning and measures them on the real model, not drawn from formulas. {PAPERS}")


def loss_panel(text: str, factor: int) -> None:
    view = views.loss_view(rope, factor, text=text)
    if view is None:
        st.info("The held-out stream needs the training corpus (shared/data) and a model that reads its GPT-2 tokens; "
                "neither holds here." if text != views.STORY else
                f"The built-in story is shorter than {stretch.CHUNK + 1:,} of this model's tokens, so there is no "
                "chunk to score.", icon=":material/info:")
        return
    figure, reading = view
    plot_column, reading_column = st.columns([3, 2])
    chart(figure, name=f"stretch-loss-{text}", where=plot_column, model=selection.model, key=f"stretch_loss_{text}")
    reading_column.markdown(reading)


@st.fragment
def scaling_sections() -> None:
    if rope is None:
        st.info("No shipped RoPE checkpoint is installed yet (checkpoints/rope.pt), and the selected model is not a "
                "trained RoPE model, so there is nothing to rescale. Sections 4 and 5 below work with whatever is "
                "installed.", icon=":material/hourglass_empty:")
        return
    train_length, config = views.rope_length(rope), rope.model.config
    st.markdown(f"Sections 1 to 3 rescale **{rope.label}**" + (
        ", the model in the sidebar." if rope.key == selection.model.key else
        ": the model in the sidebar is not a trained RoPE model. Pick a RoPE model there to rescale that one instead."))
    factor = st.radio("Scaling factor (target length ÷ training length)", [2, 4, 8], index=1, horizontal=True,
                      key="stretch_factor", format_func=lambda f: f"×{f} ({f * train_length:,} tokens" + (
                          f"; losses read to {stretch.CHUNK:,})" if f * train_length > stretch.CHUNK else ")"))

    st.subheader("1. Loss against evaluation length")
    measured = train_length < stretch.CHUNK  # every text is read in chunks of 1,024 tokens
    if not measured:
        st.info(f"This model was trained on {train_length:,} tokens, at least the {stretch.CHUNK:,} this page reads, so "
                "sections 1 and 3 would measure nothing past its training length; section 2 holds for any length.",
                icon=":material/info:")
    else:
        loss_panel(views.STORY, factor)
    held_out = st.expander(f"The same on the held-out stream: {stretch.EVAL_CHUNKS} × 1,024 tokens of the stories "
                           "held out from training", key="stretch_held_out_open", on_change="rerun")
    if held_out.open and measured:  # closed, it computes nothing: opening it reruns this fragment
        with held_out:
            loss_panel(views.HELD_OUT, factor)
    st.caption("Each text is cut into chunks of 1,024 tokens and every chunk into windows of L tokens, so every length "
               "scores the same predictions and a line moves only because the model reads more context. These are the "
               "methods without their fine-tune: what a short fine-tune at the longer length would change is not "
               "measured here." + views.left_off_sentence(rope))

    st.subheader("2. Which pairs turn fully inside the training window")
    head = config.n_embd // config.n_head
    figure, reading = views.wavelength_view(head, factor=factor, train_length=train_length, base=config.rope_base)
    chart(figure, name="stretch-wavelengths", model=selection.model, key="stretch_wavelengths")
    st.markdown(reading)
    turns = train_length / (2 * math.pi)  # pair 0 turns once every 2π positions
    floored = turns < YARN_BETA_FAST and float(yarn_ramp(head, config.rope_base, original_length=train_length)[0]) == 0
    st.caption(f"Each head has {head} columns, so {head // 2} pairs. PI divides every frequency by the factor (every "
               "wavelength ×factor); NTK-aware raises the base, so fast pairs barely move and only the slowest is "
               f"divided by the full factor; YaRN leaves pairs that turn {YARN_BETA_FAST:g} or more times alone, "
               f"interpolates those turning less than {'once' if YARN_BETA_SLOW == 1 else f'{YARN_BETA_SLOW:g} times'}, with "
               "a ramp between (its boundaries floored and ceiled as in the reference code"
               + (f", which is why pair 0 is left alone at about {turns:.0f} turns)." if floored else ")."))
    st.page_link("pages/sinusoids.py", label="The same wavelengths for the sinusoidal table", icon=":material/waves:")

    if not measured:
        return
    st.subheader("3. What goes wrong past the wall")
    left, right = st.columns(2)
    layer = left.selectbox("Layer", range(config.n_layer), key="stretch_layer", format_func=lambda i: str(i + 1))
    measure = right.radio("Measure", ["max_logit", "entropy"], horizontal=True, key="stretch_measure",
                          format_func={"max_logit": "largest attention logit", "entropy": "attention entropy"}.get)
    figure, reading = views.attention_view(rope, factor, layer=layer, measure=measure)
    chart(figure, name="stretch-attention", model=selection.model, key="stretch_attention")
    st.markdown(reading)
    st.caption("The first 1,024 tokens of the built-in story, one forward per method; the largest logit is over heads "
               "and keys, the entropy the mean over heads, both smoothed over 16 positions. Position Interpolation's "
               "diagnosis is that positions past training can give outsized scores: the lines above say whether this "
               "model's largest logit rises past the wall. Entropy grows with the number of keys a query can see, so "
               "compare it with an even spread, not with itself; YaRN's own scale multiplies q and k by "
               "0.1·ln(factor) + 1, so its logits are larger by design.")


@st.fragment
def write_past_the_wall() -> None:
    st.subheader("4. Write past the wall")
    # a model per scheme, and a table read at random positions (it reaches past the training length)
    names = [name for name in checkpoints.available() if name in SCHEMES or load_offered(name)[0].config.random_positions]
    if not names:
        st.info("No shipped checkpoint is installed yet, so there is no trained model to write with.",
                icon=":material/hourglass_empty:")
        return
    prompt_text = st.text_input("Prompt", "Once upon a time", key="stretch_prompt", max_chars=2000)
    columns = st.columns(5)
    tokens = columns[0].slider("New tokens", 16, generate.MAX_NEW_TOKENS, 256, step=16, key="stretch_tokens")
    greedy = columns[1].toggle("Greedy", key="stretch_greedy", help="Always the most likely token (temperature 0).")
    temperature = columns[2].slider("Temperature", 0.1, 2.0, 0.8, step=0.1, key="stretch_temperature", disabled=greedy)
    vocabulary = min(output_count(load_offered(name)[0]) for name in names)  # the writers' own outputs, never assumed
    top_k = columns[3].number_input("Top-k", 1, vocabulary, min(40, vocabulary), key="stretch_top_k", disabled=greedy,
                                    help=f"Sample among the k likeliest tokens; at most {vocabulary:,}, the tokens these "
                                         "models can write.")
    seed = columns[4].number_input("Seed", 0, 2**31 - 1, 0, key="stretch_seed", disabled=greedy)
    write_column, stop_column, _ = st.columns([1, 1, 5])
    start = write_column.button("Write", key="stretch_write", type="primary", icon=":material/edit:")
    stopped = stop_column.button("Stop", key="stretch_stop", icon=":material/stop:")
    prompt = encode(prompt_text)
    if not prompt:
        st.info("Type a prompt to continue: any text works.", icon=":material/edit:")
        return
    sampling = generate.Sampling(0.0 if greedy else temperature, None if greedy else int(top_k), int(seed))
    models, notes, refused = views.writers(names, prompt)
    for warning in refused:
        st.warning(warning, icon=":material/straighten:")
    job = views.writing_job(models, prompt, tokens=tokens, sampling=sampling, start=start, stop=stopped)
    if job is None:
        st.caption("Press Write: each model continues the prompt in its own box, token by token.")
    else:
        boxes = {}
        for name in job.written:
            st.markdown(f"**{label(name)}** · {notes.get(name, '')}")
            boxes[name] = st.container(border=True).empty()  # the whole text, full width: no scroll box
        views.write(job, boxes, started=start)
        if job.state in ("stopped", "interrupted"):
            st.caption(f"{job.state.capitalize()}: the texts end where writing stopped.")
    st.caption("Each new token costs one position's forward: the keys and values already computed stay in a cache. "
               "The red mark is where the text reaches the training length; a sampled run repeats exactly for a seed. "
               "A model with a position table stops at its last row rather than sliding a window, which would "
               "quietly forget the prompt.")


@st.fragment
def shift_section() -> None:
    st.subheader("5. Absolute vs relative, as a shift")
    ids = selection.ids[:MAX_TOKENS]
    if not ids:
        st.info("Type a sentence in the sidebar: this section moves it along the positions.", icon=":material/edit:")
        return
    offset = st.slider("Offset k: the sentence sits at positions k, k+1, … instead of 0, 1, …", 1, 512, 64,
                       key="stretch_offset")
    models = scheme_models(selection)
    changes = views.offset_changes(models, ids, offset)
    rows = [{"scheme": m.scheme, "model": m.label,
             "max |change| of the last position's logits": f"{c:.2e}" if c is not None else
             f"n/a: the table has {m.model.max_input_length} rows; the sentence would end at position {offset + len(ids) - 1}"}
            for m, c in zip(models, changes)]
    st.table(pd.DataFrame(rows).set_index("scheme"))
    st.caption(stretch.shift_sentence([(m.scheme, c) for m, c in zip(models, changes)], tokens=len(ids), offset=offset,
                                      table_rows={m.scheme: m.model.max_input_length for m in models}))


scaling_sections()
write_past_the_wall()
shift_section()
