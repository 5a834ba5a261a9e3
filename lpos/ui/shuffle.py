"""The Order-blindness view: the shuffle experiment on every scheme's model, cached per
(models, original ids, shuffled ids); a model is named by its key (lpos.ui.caching). And the
experiment the page draws: the sentence, its shuffle, layer 1 of every scheme, the whole model,
and where the last token looks before and after.
"""
from __future__ import annotations

import streamlit as st

from lpos import precomputed
from lpos.analysis import shuffle
from lpos.analysis.scheme_views import (baseline_caption, baseline_sentence, mask_sentence, moved_sentence,
                                        positionless_scheme, ties_sentence, weight_change, weights_sentence)
from lpos.figures.export import Recipe, Ref, step
from lpos.figures.shuffle import attention_bars, change_figure
from lpos.ui.attention import head_label
from lpos.ui.caching import cache_data
from lpos.ui.export import chart, run_recipe
from lpos.ui.models import LoadedModel
from lpos.ui.selection import Selection, scheme_models
from lpos.ui.stored import computed

SOURCES = {
    "swap": "“The dog bit the man.” → “The man bit the dog.”",
    "dog": "“The dog bit the man.”, shuffled",
    "man": "“The man bit the dog.”, shuffled",
    "sidebar": "The sidebar sentence, shuffled",
}
PRESETS = {"dog": "The dog bit the man.", "man": "The man bit the dog."}
MAX_SHUFFLE_TOKENS = 64  # enough for a paragraph; bars of more tokens cannot be read
BASELINE = positionless_scheme()  # the scheme with no rows and nothing in attention: order-blind in layer 1


@cache_data(max_entries=128, show_spinner="Shuffling and running every scheme's model…")
def shuffle_results(models: list[LoadedModel], original: list[int], shuffled: list[int]) -> list[shuffle.ShuffleResult]:
    """shuffle_experiment on each model, in order (the presets' are precomputed for the shipped models)."""
    return [computed(m, precomputed.SHUFFLE, original=list(original), shuffled=list(shuffled), tokenizer=m.tokenizer)
            for m in models]


def bars_recipe(result: shuffle.ShuffleResult, *, head: int) -> Recipe:
    """The attention bars of one model's shuffle result, as the recipe that reruns the experiment
    (lpos.figures.export): drawn with that model, shown as Python."""
    return Recipe((step("result", shuffle.shuffle_experiment, Ref("model"), list(result.original),
                        shuffled=list(result.shuffled), tokenizer=Ref("tokenizer")),
                   step("fig", attention_bars, Ref("result"), head=head, tokenizer=Ref("tokenizer"))))


def next_shuffle() -> None:
    """The button draws the next permutation; from the fixed swap it starts shuffling the first preset."""
    if st.session_state.get("shuffle_source") == "swap":
        st.session_state["shuffle_source"] = "dog"
    else:
        st.session_state["shuffle_seed"] = st.session_state.get("shuffle_seed", 0) + 1


def sentence_tokens(selection: Selection, source: str) -> list[int]:
    """The chosen sentence's tokens; stops the run with what to do when the sidebar's is too short."""
    if source != "sidebar":  # a character model drops what it lacks
        return selection.model.tokenizer.encode_known(PRESETS["dog" if source == "swap" else source])[0]
    if len(selection.ids) < 3:
        st.info("The shuffle needs at least three tokens: two earlier ones to swap and the last one to look from. "
                + ("Type a sentence in the sidebar" if not selection.ids else f"Your text has {len(selection.ids)}; "
                   "type a longer sentence in the sidebar") + ", or pick a preset above.", icon=":material/edit:")
        st.stop()
    return selection.ids


def shuffle_of(selection: Selection, original: list[int], source: str, seed: int,
               models: list[LoadedModel]) -> tuple[list[int], list[int]]:
    """The tokens cut to what every model reads, and their shuffle; stops the run when no shuffle changes them."""
    tokenizer = selection.model.tokenizer
    limit = min([MAX_SHUFFLE_TOKENS] + [m.max_input_length for m in models if m.max_input_length is not None])
    if len(original) > limit:
        st.caption(f"Using the first {limit} of {len(original):,} tokens: the bars stay readable and every "
                   "scheme's model can read them.")
        original = original[:limit]
    if not shuffle.can_shuffle(original):
        st.info("Every token before the last is the same token, so no permutation changes the order. "
                "Type a sentence with different words in the sidebar, or pick a preset above.", icon=":material/edit:")
        st.stop()
    shuffled = (tokenizer.encode_known(PRESETS["man"])[0][:limit] if source == "swap" else
                shuffle.shuffle_earlier(original, seed=seed))
    st.code(f"original: {tokenizer.decode(original)}\n"  # the shuffle token by token: decoded, it glues words together
            f"shuffled: {shuffle.token_by_token(original, shuffled, tokenizer=tokenizer)}", language=None, wrap_lines=True)
    if source == "swap":
        st.caption("The two presets hold the same tokens and end on the same “.”, so the second is one permutation of "
                   "the first: an honest shuffle. (Without the full stop their last tokens would differ.)")
    return original, shuffled


def layer_one(models: list[LoadedModel], results: list[shuffle.ShuffleResult], *, sidebar: str) -> None:
    """Layer 1's output at the last position, for every scheme (`sidebar` marked): the table, the bars and what
    they say."""
    table = shuffle.shuffle_table(results, labels=[m.label for m in models])
    st.subheader(f"Layer 1: the last position's attention output, all {len(models)} schemes")
    table_column, figure_column = st.columns([3, 2])
    shown = table.assign(**{
        "scheme": [s + (" (sidebar)" if s == sidebar else "") for s in table["scheme"]],
        "layer-1 attention output, max |change|": table["layer-1 attention output, max |change|"].map("{:.2e}".format),
        "order-blind at layer 1": table["order-blind at layer 1"].map({True: "yes", False: "no"}),
        "full-model logits, max |change|": table["full-model logits, max |change|"].map("{:.2e}".format),
    })
    table_column.table(shown.set_index("scheme"))
    baseline = next((r for r in results if r.scheme == BASELINE), None)
    others = [(m, r) for m, r in zip(models, results) if r.scheme != BASELINE]
    if baseline is not None and baseline.order_blind:
        table_column.success(baseline_sentence(baseline), icon=":material/check_circle:")
    elif baseline is not None:
        table_column.warning(baseline_sentence(baseline), icon=":material/warning:")
    table_column.markdown(moved_sentence([r for _, r in others], trained=[m.trained for m, _ in others]))
    chart(change_figure(table), name="order-blindness-change-every-scheme", where=figure_column, key="shuffle_change")
    figure_column.caption(baseline_caption(baseline) + "\n\n" + ties_sentence([r.scheme for _, r in others])
                          + " So moving a token can change what it contributes; the bars say by how much.")


@st.fragment
def experiment(selection: Selection) -> None:
    """The sentence choice, seed and button, and everything they drive: using one reruns only this."""
    source_column, seed_column, button_column = st.columns([3, 1, 2], vertical_alignment="bottom")
    source = source_column.radio("Sentence", list(SOURCES), format_func=SOURCES.get, key="shuffle_source",
                                 horizontal=True)
    seed = seed_column.number_input("Seed", min_value=0, max_value=10_000, step=1, key="shuffle_seed",
                                    help="Which permutation: the same seed gives the same shuffle.")
    button_column.button("Shuffle earlier tokens", key="shuffle_button", on_click=next_shuffle,
                         icon=":material/shuffle:")
    original = sentence_tokens(selection, source)
    models = scheme_models(selection)
    original, shuffled = shuffle_of(selection, original, source, seed, models)
    results = shuffle_results(models, original, shuffled)
    layer_one(models, results, sidebar=selection.scheme)
    st.subheader("The whole model: the causal mask leaks order")
    st.table(shuffle.top1_table(results).set_index("scheme"))  # one token a cell: a phone's table stays short
    with st.expander("The top 5 next tokens of each model, before and after", icon=":material/table:"):
        predictions = shuffle.predictions_table(results)  # yes/no, the wording of the table above, not True/False
        st.table(predictions.assign(**{"same top-1": predictions["same top-1"].map({True: "yes", False: "no"}),
                                       "distribution moved (total variation)":
                                       predictions["distribution moved (total variation)"].map("{:.3f}".format)})
                 .set_index("scheme"))
    baseline = next((r for r in results if r.scheme == BASELINE), None)
    if baseline is not None:
        st.markdown(mask_sentence(baseline, layers=next(m for m in models if m.scheme == BASELINE).config.n_layer))
    looks(models, results, sidebar=selection.scheme)


@st.fragment
def looks(models: list[LoadedModel], results: list[shuffle.ShuffleResult], *, sidebar: str) -> None:
    """The attention bars of the position-free scheme and the `sidebar` one, with their own head control."""
    st.subheader("Where the last token looks, before and after")
    shown_models = [m for m in models if m.scheme in (BASELINE, sidebar)]
    heads = max(m.config.n_head for m in shown_models)  # every head of the widest model is offered
    # the sidebar's model (loaded already) where the two are as wide
    widest = max(shown_models, key=lambda m: (m.config.n_head, m.scheme == sidebar)).model
    if heads == 1:  # one head: nothing to choose
        st.caption(f"Each model has one attention head: {head_label(widest, 0)}.")
        head = 0
    else:
        head = st.segmented_control("Attention head", list(range(heads)), default=0, required=True, key="shuffle_head",
                                    format_func=lambda h: head_label(widest, h))  # with GQA: the key head it shares
        head = min(head or 0, heads - 1)
    for column, model in zip(st.columns(len(shown_models)), shown_models):
        result = results[[m.scheme for m in models].index(model.scheme)]
        if head >= model.config.n_head:
            column.info(f"{model.scheme} · {model.label} has {model.config.n_head} heads (1 to "
                        f"{model.config.n_head}): it has no head {head + 1}.", icon=":material/info:")
            continue
        recipe = bars_recipe(result, head=head)  # drawn from the result already computed (or stored): no model loaded
        chart(run_recipe(recipe, model, result=result), recipe=recipe, name="order-blindness-attention-bars",
              where=column, model=model, key=f"shuffle_bars_{model.scheme}")
        column.caption(f"{model.scheme} · {model.label}. Each token keeps its colour.\n\n"
                       + weights_sentence(weight_change(result, head=head), positionless=model.scheme == BASELINE)
                       + (" Pick another scheme in the sidebar to see it beside this one." if len(shown_models) == 1 else ""))
