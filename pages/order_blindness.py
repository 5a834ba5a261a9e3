"""Order blindness: shuffle every token but the last and see which schemes notice."""
import streamlit as st

from lpos import ui
from lpos.analysis.scheme_views import names, positionless_scheme, ties_sentence, weight_change
from lpos.analysis.shuffle import (ORDER_BLIND_TOLERANCE, can_shuffle, predictions_table, shuffle_earlier, shuffle_table,
                                   token_by_token)
from lpos.figures.shuffle import change_figure
from lpos.ui.attention import head_label
from lpos.ui.selection import scheme_models
from lpos.ui import shuffle as shuffle_view
from lpos.ui.shuffle import shuffle_results
from lpos.ui.export import chart

SOURCES = {
    "swap": "“The dog bit the man.” → “The man bit the dog.”",
    "dog": "“The dog bit the man.”, shuffled",
    "man": "“The man bit the dog.”, shuffled",
    "sidebar": "The sidebar sentence, shuffled",
}
PRESETS = {"dog": "The dog bit the man.", "man": "The man bit the dog."}
MAX_SHUFFLE_TOKENS = 64  # enough for a paragraph; bars of more tokens cannot be read
BASELINE = positionless_scheme()  # the scheme with no rows and nothing in attention: order-blind in layer 1


def next_shuffle() -> None:
    """The button draws the next permutation; from the fixed swap it starts shuffling the first preset."""
    if st.session_state.get("shuffle_source") == "swap":
        st.session_state["shuffle_source"] = "dog"
    else:
        st.session_state["shuffle_seed"] = st.session_state.get("shuffle_seed", 0) + 1


selection = ui.selection()
st.title("Shuffle the earlier tokens: who notices?")
st.caption(
    "Keep the last token, permute every token before it, and compare what the last position computes. "
    "Attention without positions is a weighted average over a set of tokens, and a set has no order."
)


@st.fragment
def experiment() -> None:
    """The sentence choice, seed and button, and everything they drive: using one reruns only this."""
    source_column, seed_column, button_column = st.columns([4, 1, 1], vertical_alignment="bottom")
    source = source_column.radio("Sentence", list(SOURCES), format_func=SOURCES.get, key="shuffle_source",
                                 horizontal=True)
    seed = seed_column.number_input("Seed", min_value=0, max_value=10_000, step=1, key="shuffle_seed",
                                    help="Which permutation: the same seed gives the same shuffle.")
    button_column.button("Shuffle earlier tokens", key="shuffle_button", on_click=next_shuffle,
                         icon=":material/shuffle:")

    tokenizer = selection.model.tokenizer
    if source == "sidebar":
        original = selection.ids
        if len(original) < 3:
            st.info("The shuffle needs at least three tokens: two earlier ones to swap and the last one to look from. "
                    + ("Type a sentence in the sidebar" if not original else f"Your text has {len(original)}; type a "
                       "longer sentence in the sidebar") + ", or pick a preset above.", icon=":material/edit:")
            st.stop()
    else:
        original = tokenizer.encode_known(PRESETS["dog" if source == "swap" else source])[0]  # a character model drops what it lacks

    models = scheme_models(selection)
    limit = min([MAX_SHUFFLE_TOKENS] + [m.model.max_input_length for m in models if m.model.max_input_length is not None])
    if len(original) > limit:
        st.caption(f"Using the first {limit} of {len(original):,} tokens: the bars stay readable and every "
                   "scheme's model can read them.")
        original = original[:limit]
    if not can_shuffle(original):
        st.info("Every token before the last is the same token, so no permutation changes the order. "
                "Type a sentence with different words in the sidebar, or pick a preset above.", icon=":material/edit:")
        st.stop()
    shuffled = tokenizer.encode_known(PRESETS["man"])[0][:limit] if source == "swap" else shuffle_earlier(original, seed=seed)

    st.code(f"original: {tokenizer.decode(original)}\nshuffled: {tokenizer.decode(shuffled)}\n"
            f"shuffled, token by token: {token_by_token(original, shuffled, tokenizer=tokenizer)}", language=None,
            wrap_lines=True)
    if source == "swap":
        st.caption("The two presets hold the same tokens and end on the same “.”, so the second is one permutation of "
                   "the first: an honest shuffle. (Without the full stop their last tokens would differ.)")

    results = shuffle_results(models, original, shuffled)
    table = shuffle_table(results, labels=[m.label for m in models])

    st.subheader(f"Layer 1: the last position's attention output, all {len(models)} schemes")
    table_column, figure_column = st.columns([3, 2])
    shown = table.assign(**{
        "scheme": [s + (" (sidebar)" if s == selection.scheme else "") for s in table["scheme"]],
        "layer-1 attention output, max |change|": table["layer-1 attention output, max |change|"].map("{:.2e}".format),
        "order-blind at layer 1": table["order-blind at layer 1"].map({True: "yes", False: "no"}),
        "full-model logits, max |change|": table["full-model logits, max |change|"].map("{:.2e}".format),
    })
    table_column.table(shown.set_index("scheme"))
    baseline = next((r for r in results if r.scheme == BASELINE), None)
    others = [(m, r) for m, r in zip(models, results) if r.scheme != BASELINE]
    if baseline is not None and baseline.order_blind:
        table_column.success(f"With `{BASELINE}`, the shuffle moved layer 1's output by {baseline.attention_change:.1e}: "
                             "float rounding, nothing more.", icon=":material/check_circle:")
    elif baseline is not None:
        table_column.warning(f"With `{BASELINE}`, layer 1's output moved by {baseline.attention_change:.1e}, more than "
                             "float error: this model is not position-free.", icon=":material/warning:")
    table_column.markdown(moved_sentence(others))
    chart(change_figure(table), name="order-blindness-change-every-scheme", where=figure_column, key="shuffle_change")
    figure_column.caption(baseline_caption(baseline) + "\n\n" + ties_sentence([r.scheme for _, r in others])
                          + " So moving a token can change what it contributes; the bars say by how much.")

    st.subheader("The whole model: the causal mask leaks order")
    predictions = predictions_table(results)  # yes/no, the wording of the table above, not True/False
    st.table(predictions.assign(**{"same top-1": predictions["same top-1"].map({True: "yes", False: "no"})})
             .set_index("scheme"))
    if baseline is not None:
        st.markdown(mask_sentence(baseline, layers=next(m for m in models if m.scheme == BASELINE).model.config.n_layer))
    looks(models, results)


def moved_sentence(others: list) -> str:
    """Which schemes with positions moved layer 1's output past float error, by how much, and which did not."""
    moved = [r for _, r in others if not r.order_blind]
    still = [(m, r) for m, r in others if r.order_blind]
    least, most = (min(moved, key=lambda r: r.attention_change), max(moved, key=lambda r: r.attention_change)) \
        if moved else (None, None)
    said = (f"{names([r.scheme for r in moved])} moved it by more than float error: from {least.attention_change:.1e} "
            f"({least.scheme}) to {most.attention_change:.1e} ({most.scheme})." if len(moved) > 1 else
            f"{least.scheme} moved it by more than float error: {least.attention_change:.1e}." if moved else "")
    if still:
        its = "its" if len(still) == 1 else "their"
        untrained = [r.scheme for m, r in still if not m.trained]
        why = ("" if not untrained else f" (untrained, so {its} position weights are still as they started)"
               if len(untrained) == len(still) else f" ({names(untrained)}: untrained, its position weights still as "
               "they started)" if len(untrained) == 1 else f" ({names(untrained)}: untrained, their position weights "
               "still as they started)")
        said += (f" {names([r.scheme for _, r in still])} stayed within float error too: with these weights, {its} "
                 f"positions leave layer 1's output at the last token unchanged{why}.")
    return said.strip()


def baseline_caption(baseline) -> str:
    """Where the position-free scheme's bar sits against the float-error line, measured."""
    if baseline is None:
        return "Log scale, with the float-error line dashed."
    change = baseline.attention_change
    where = ("orders of magnitude below" if change < ORDER_BLIND_TOLERANCE / 100 else
             "below" if change < ORDER_BLIND_TOLERANCE else "above")
    return f"Log scale: `{BASELINE}` sits {where} the dashed float-error line."


def mask_sentence(baseline, *, layers: int) -> str:
    """What the full position-free model did with the shuffle, and why (the causal mask)."""
    if layers < 2:
        return (f"This `{BASELINE}` model has a single layer, so its prediction is order-blind too: the mask leaks order "
                "only once a second layer reads what each prefix computed.")
    moved = baseline.logits_change > ORDER_BLIND_TOLERANCE
    return (f"The full `{BASELINE}` model is {'not ' if moved else ''}order-blind: its next-token distribution moved by a "
            f"total variation of {baseline.distribution_change:.3f} (logits by up to {baseline.logits_change:.2f}), and "
            f"its top-1 token {'stayed the same' if baseline.same_top1 else 'changed'}. From layer 2 "
            "on, the last token reads the earlier positions' layer-1 outputs, and each of those attended only over its "
            "own prefix. Shuffle the tokens and the prefixes change, so the causal mask alone can tell a deep model "
            "about order.")


@st.fragment
def looks(models: list, results: list) -> None:
    """The attention bars, with their own head control."""
    st.subheader("Where the last token looks, before and after")
    shown_models = [m for m in models if m.scheme in (BASELINE, selection.scheme)]
    heads = max(m.model.config.n_head for m in shown_models)  # every head of the widest model is offered
    widest = max(shown_models, key=lambda m: m.model.config.n_head).model
    if heads == 1:  # one head: nothing to choose
        st.caption(f"Each model has one attention head: {head_label(widest, 0)}.")
        head = 0
    else:
        head = st.segmented_control("Attention head", list(range(heads)), default=0, required=True, key="shuffle_head",
                                    format_func=lambda h: head_label(widest, h))  # with GQA: the key head it shares
        head = min(head or 0, heads - 1)
    for column, model in zip(st.columns(len(shown_models)), shown_models):
        result = results[[m.scheme for m in models].index(model.scheme)]
        if head >= model.model.config.n_head:
            column.info(f"{model.scheme} · {model.label} has {model.model.config.n_head} heads (0 to "
                        f"{model.model.config.n_head - 1}): it has no head {head}.", icon=":material/info:")
            continue
        chart(shuffle_view.bars_recipe(result, head=head), name="order-blindness-attention-bars", where=column, model=model, key=f"shuffle_bars_{model.scheme}")
        change = weight_change(result, head=head)
        column.caption(f"{model.scheme} · {model.label}. Each token keeps its colour.\n\n"
                       + (("Without positions each" if model.scheme == BASELINE else "Each")
                          + " weight travels with its token: same heights up to float rounding, new places."
                          if change < ORDER_BLIND_TOLERANCE else
                          f"The weights change, not only their places: the largest change is {change:.2g}.")
                       + (" Pick another scheme in the sidebar to see it beside this one." if len(shown_models) == 1 else ""))


experiment()
