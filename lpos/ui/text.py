"""User text made safe to quote inside a Markdown message (st.info, st.caption, st.markdown)."""
from __future__ import annotations

import re

MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>$~:&])")


def literal(text: str) -> str:
    """`text` for st.info / st.success / st.markdown, shown as the characters it is.

    Token text is user-controlled: `**`, `$x$`, `:smile:` or `<b>` must not become bold,
    maths, an emoji or markup.
    """
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)
