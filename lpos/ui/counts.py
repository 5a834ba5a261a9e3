"""The attention page's contextual-position section (CoPE): what each head counts, from the last token
back and as a running count, and what the counts follow on the sentence and on the built-in story.

Results are cached per (model, token ids, layer); a model is named by its key (lpos.ui.caching).
"""
from __future__ import annotations

import streamlit as st

from lpos.analysis import counts
from lpos.analysis.counts import count_heatmap_sentence, count_table_sentence, units_so_far
from lpos.corpus import story
from lpos.figures.counts import count_heatmap, running_count_figure
from lpos.figures.export import Recipe, Ref, step
from lpos.ui.caching import cache_data
from lpos.ui.export import chart
from lpos.ui.models import LoadedModel

contextual_counts = cache_data(max_entries=32, show_spinner=False)(counts.contextual_counts)  # per (model, ids, layer)


@cache_data(max_entries=32, show_spinner=False)
def count_table(loaded: LoadedModel, ids: list[int], *, layer: int) -> counts.CountSummary:
    """What each head's count follows, on the sentence and on the built-in story, in the model's own tokens."""
    tokenizer = loaded.tokenizer
    story_ids, _ = tokenizer.encode_known(story())
    return counts.count_table(loaded.model, layer=layer, sentence=(list(ids), tokenizer.token_strings(list(ids))),
                              story=(story_ids, tokenizer.token_strings(story_ids)))


def counts_recipe(ids: list[int], *, layer: int, tokens: list[str]) -> Recipe:
    """Each head's count of every earlier token from the last one, as a recipe (lpos.figures.export)."""
    return Recipe((step("found", counts.contextual_counts, Ref("model"), list(ids), layer=layer),
                   step("fig", count_heatmap, Ref("found"), tokens=list(tokens))))


def counts_section(loaded: LoadedModel, ids: list[int], tokens: list[str], *, layer: int) -> None:
    """What each head counts: every token's position from the last token, the running count, and a measurement."""
    found = contextual_counts(loaded.model, ids, layer=layer)
    chart(counts_recipe(ids, layer=layer, tokens=tokens), name="attention-counts", model=loaded, key="ra_counts")
    st.caption(count_heatmap_sentence(found))
    references = units_so_far(loaded.tokenizer.token_strings(ids))  # the model's own tokens, as it counts them
    chart(running_count_figure(found, tokens=tokens, references=references), name="attention-running-counts",
          model=loaded, key="ra_count_lines")
    st.caption("Each head's count from the first token up to each token, as that token's query counts it. Grey: how "
               "many tokens, word starts and sentence ends there are so far; a head that counts words runs along the "
               "words line, one that counts full stops along the sentences line.")
    summary = count_table(loaded, ids, layer=layer)
    st.dataframe(summary.table.style.format({"per token": "{:.2f}", "tokens": "{:.3f}", "words": "{:.3f}",
                                             "sentences": "{:.3f}"}, na_rep="—"), hide_index=True, key="ra_count_table")
    st.caption(count_table_sentence(summary, layer=layer, trained=loaded.trained))
