"""What a page shows instead of a stack trace: empty text, too many tokens, the learned wall;
and user text made safe to quote inside a Markdown message."""
from __future__ import annotations

import re

import streamlit as st

from lpos.ui.state import MAX_TOKENS, Selection

MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>$~:&])")


def literal(text: str) -> str:
    """`text` for st.info / st.success / st.markdown, shown as the characters it is.

    Token text is user-controlled: `**`, `$x$`, `:smile:` or `<b>` must not become bold,
    maths, an emoji or markup.
    """
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def usable_ids(selection: Selection, *, minimum: int = 1) -> list[int]:
    """The ids a page may draw, or stop the page with a friendly message.

    Empty text asks for a sentence; text past the learned table's last row says so and offers
    to show the first rows; text past MAX_TOKENS is cut with a note.
    """
    ids = selection.ids
    if len(ids) < minimum:
        st.info("Type a sentence in the sidebar to begin: any text works, it is split into GPT-2 tokens."
                if not ids else f"This view needs at least {minimum} tokens; your text has {len(ids)}. "
                "Add a few words in the sidebar.", icon=":material/edit:")
        st.stop()
    config = selection.model.model.config
    if config.position == "learned" and len(ids) > config.block_size:
        st.warning(f"The learned table has {config.block_size} rows; your text has {len(ids)} tokens. "
                   "A learned table stops at its last row: sinusoidal, rope, alibi and none extend to any "
                   "length. Shorten the text, pick another scheme, or show the first rows.",
                   icon=":material/straighten:")
        if not st.toggle(f"Show the first {config.block_size} tokens", key="truncate_learned"):
            st.stop()
        return ids[: config.block_size]
    if len(ids) > MAX_TOKENS:
        st.caption(f"Showing the first {MAX_TOKENS:,} of {len(ids):,} tokens.")
        return ids[:MAX_TOKENS]
    return ids
