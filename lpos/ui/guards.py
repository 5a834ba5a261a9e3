"""What a page shows instead of a stack trace: empty text, too many tokens, a table's last row.
User text is quoted in messages through lpos.ui.text.literal."""
from __future__ import annotations

import streamlit as st

from lpos.analysis.counts import listed
from lpos.positions import REGISTRY
from lpos.ui.selection import MAX_TOKENS, Selection

__all__ = ["usable_ids"]


def schemes_without_a_table(extending: list[str]) -> str:
    """The schemes that read any length, named when they are few, counted with the first three when they are many."""
    return listed(extending) if len(extending) <= 4 else f"the {len(extending)} schemes without one ({', '.join(extending[:3])}, …)"


def usable_ids(selection: Selection, *, minimum: int = 1) -> list[int]:
    """The ids a page may draw, or stop the page with a friendly message.

    Empty text asks for a sentence; text past the model's longest input (a learned table's last
    row) says so and offers to show the first rows; text past MAX_TOKENS is cut with a note.
    """
    ids = selection.ids
    if len(ids) < minimum:
        st.info(f"Type a sentence in the sidebar to begin: any text works, it is split into {selection.model.tokenizer.name} "
                "tokens." if not ids else f"This view needs at least {minimum} tokens; your text has {len(ids)}. "
                "Add a few words in the sidebar.", icon=":material/edit:")
        st.stop()
    model = selection.model.model
    rows = model.max_input_length
    if rows is not None and len(ids) > rows:
        extending = [name for name, scheme in REGISTRY.items() if scheme.max_length(model.config) is None]
        st.warning(f"The {model.scheme.label.lower()} has {rows} rows; your text has {len(ids)} tokens. "
                   f"A table stops at its last row; {schemes_without_a_table(extending)} extend to any length. This page shows the first {rows} tokens and leaves the other {len(ids) - rows:,} out; "
                   "shorten the text or pick another scheme to see them all.",
                   icon=":material/straighten:")
        if not st.toggle(f"Show the first {rows} tokens", value=True, key="truncate_learned"):
            st.stop()
        return ids[:rows]
    if len(ids) > MAX_TOKENS:
        st.caption(f"Showing the first {MAX_TOKENS:,} of {len(ids):,} tokens.")
        return ids[:MAX_TOKENS]
    return ids
