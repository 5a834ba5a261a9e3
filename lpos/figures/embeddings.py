"""Figures of the embedding layer: token chips (HTML) and the token + position = sum heatmaps."""
from __future__ import annotations

import html
import re
from collections import Counter

import numpy as np
import plotly.graph_objects as go

from lpos.analysis.embeddings import EmbeddingView, lookalike_tokens
from lpos.figures.common import DIVERGING, finish, nothing_added, position_labels, subplots, tick_step
from lpos.tokenizer import Tokenizer, visible

CHIP_LIMIT = 200  # more chips than this is a wall, not a picture; the table has every token
CHIP_TEXT_CHARS = 8  # what fits on a chip; the tooltip has the whole token
BYTE_LABEL = re.compile(r"‹([0-9A-F]{2})[0-9A-F ]* of ([^›]+)›")  # "‹F0 9F of 🐶›" (lpos.vocab.base.piece_labels)
# Sizes in em of .lpos-chips, so one font-size scales the whole row (presenter mode does);
# colours translucent over the inherited text colour, so they read on light and dark themes.
CHIP_CSS = """
.lpos-chips {font-size: 1rem; margin: 0.25em 0 0.75em;}
.lpos-chips-title {font-size: 0.95em; font-weight: 600; margin-bottom: 0.4em;}
.lpos-chips-row {display: flex; flex-wrap: wrap; gap: 0.35em;}
.lpos-chip {display: inline-flex; flex-direction: column; align-items: center; min-width: 3.2em;
  padding: 0.2em 0.45em; border-radius: 0.4em; line-height: 1.25; cursor: default;
  border: 1px solid rgba(74, 111, 165, 0.75); background: rgba(74, 111, 165, 0.14);}
.lpos-chip-text {font-family: "Source Code Pro", monospace; font-size: 0.9em; font-weight: 600; white-space: pre;}
.lpos-chip-meta {font-size: 0.72em; opacity: 0.8; white-space: nowrap;}
.lpos-chip-no-counts {border-color: rgba(128, 128, 128, 0.6); background: rgba(128, 128, 128, 0.12);}
.lpos-chip-never {border: 2px solid rgb(220, 53, 69); background: rgba(220, 53, 69, 0.18);}
.lpos-chip-never .lpos-chip-meta {opacity: 1; font-weight: 600;}
"""
NEVER_SEEN = "never seen in training: this row is still its random initial value"
PANEL_NAMES = ("token rows", "position rows", "summed rows")


def chip_text(token: str) -> str:
    """A token cut to what fits on a chip: "␣elephant" -> "␣elepha…". A piece of a character keeps the character
    and its first byte, "‹90 of 🐶›" -> "‹90…🐶›", and a label is never cut in two (cut at the width, it lost
    its character: "‹90 of …")."""
    if len(token) <= CHIP_TEXT_CHARS:
        return token
    token = BYTE_LABEL.sub(lambda label: f"‹{label[1]}…{label[2]}›", token)
    return token if len(token) <= CHIP_TEXT_CHARS or "‹" in token else token[: CHIP_TEXT_CHARS - 1] + "…"


def short_count(count: int) -> str:
    """Training count in at most six characters: 907×, 2,907×, 38.8k×, 1.2M×."""
    if count < 10_000:
        return f"{count:,}×"
    if count < 1_000_000:
        return f"{count / 1000:.1f}k×"
    return f"{count / 1_000_000:.1f}M×"


def count_sentence(count: int | None) -> str:
    if count is None:
        return "no training counts for this model"
    if count == 0:
        return NEVER_SEEN
    return f"occurs {count:,} times in the training text"


def escape(text: str) -> str:
    """Token text for HTML, attribute values included. A carriage return becomes a character
    reference: written raw, a browser's parser would turn it into a newline."""
    return html.escape(text, quote=True).replace("\r", "&#13;")


def chip_tooltip(position: int, token: str, token_id: int, count: int | None) -> str:
    """The whole story of one chip, for its native tooltip: one fact a line, escaped."""
    length = f"{len(token)} character" + ("" if len(token) == 1 else "s")
    lines = [f"position {position}", f"token “{token}” ({length})"]
    if "‹" in token:  # a byte piece (lpos.tokenizer.token_strings)
        lines.append("(part of a character split across tokens)")
    lines += [f"id {token_id}", count_sentence(count)]
    return escape("\n".join(lines))


def chips_title(view: EmbeddingView) -> str:
    """The chips' title line, "5 tokens: text (␣ = space), GPT-2 id, ..." (a learner's model: "id in the
    model's own vocabulary", and the tokenizer's name at the end), with "↵ = newline" when a chip shows
    one, saying when only the first CHIP_LIMIT chips are drawn."""
    n = len(view.ids)
    cut = f" (the first {CHIP_LIMIT} of {n})" if n > CHIP_LIMIT else ""
    trained = any(c is not None for c in view.counts)
    gpt2 = view.tokenizer_name == "GPT-2"
    ids = "GPT-2 id" if gpt2 else "id in the model's own vocabulary"
    key = "␣ = space" + (", ↵ = newline" if any("↵" in t for t in view.tokens[:CHIP_LIMIT]) else "")
    legend = (f"text ({key}), {ids}, occurrences in the training text; red = never seen" if trained else
              f"text ({key}) and {ids}; no training counts for this model")
    legend += "" if gpt2 else f"; vocabulary: {view.tokenizer_name}"
    return f"{n} token{'s' if n != 1 else ''}{cut}: {legend}"


def unseen_caption(view: EmbeddingView, unseen: list[int], *, literal) -> str:
    """The red chips by text and position, the first ten of those drawn; the never-seen tokens past the
    CHIP_LIMIT chips drawn are counted, not named. `literal` writes a token's text for a caption."""
    drawn = [p for p in unseen if p < CHIP_LIMIT]
    named = ", ".join(f"“{literal(view.tokens[p])}” (position {p})" for p in drawn[:10])
    said = f"Red chips, {NEVER_SEEN}: {named}" + (f" and {len(drawn) - 10} more" if len(drawn) > 10 else "") \
        if drawn else "No chip drawn is red"
    past = len(unseen) - len(drawn)
    return said + (f"; {past} token{'s' if past != 1 else ''} past the {CHIP_LIMIT} chips drawn never "
                   f"{'occur' if past != 1 else 'occurs'} in training either." if past else ".")


def token_chips_html(view: EmbeddingView) -> str:
    """One chip per token as self-contained HTML: its text (whitespace visible) cut to CHIP_TEXT_CHARS,
    then its id and training count on a small second line; the native tooltip gives the whole
    token and the exact count. Never-seen tokens are red and say "never seen". At most CHIP_LIMIT chips.

    Plain HTML rather than a Plotly figure: chips are text in boxes, so the browser lays them out and
    wraps them. Every piece of token text is escaped here (CHIP_CSS says how the chips look).
    """
    chips = []
    for p in range(min(len(view.ids), CHIP_LIMIT)):
        token, token_id, count = view.tokens[p], view.ids[p], view.counts[p]
        kind = "no-counts" if count is None else "never" if count == 0 else "seen"
        said = "" if count is None else " · never seen" if count == 0 else f" · {short_count(count)}"
        chips.append(f'<span class="lpos-chip lpos-chip-{kind}" role="listitem" '
                     f'title="{chip_tooltip(p, token, token_id, count)}">'
                     f'<span class="lpos-chip-text">{escape(chip_text(token))}</span>'
                     f'<span class="lpos-chip-meta">id {token_id}{said}</span></span>')
    return (f"<style>{CHIP_CSS}</style>"
            f'<div class="lpos-chips"><div class="lpos-chips-title">{escape(chips_title(view))}</div>'
            f'<div class="lpos-chips-row" role="list">{"".join(chips)}</div></div>')


def lookalike_pair(view: EmbeddingView) -> tuple[int, int] | None:
    """The first two positions whose tokens read as the same word but are different ids, leaving out
    pieces of a character (a BPE of one's own shows those as U+FFFD, and two of them read alike
    without being one word); None if there is no such pair."""
    for i, j in lookalike_tokens(view):
        if "\ufffd" not in view.tokens[i] + view.tokens[j]:
            return i, j
    return None


def lookalike_difference(a: str, b: str) -> str:
    """How two tokens that read as the same word differ, from their text (whitespace made visible):
    "in case and in the leading space" for "The" and "␣the"; "in case" for a character model's "T" and "t".
    Computed from the pair, so it is true of whatever tokenizer made them."""
    core_a, core_b = (t.replace("␣", "").strip() for t in (a, b))
    differences = []
    if core_a != core_b:
        differences.append("case")
    if a.startswith("␣") != b.startswith("␣"):
        differences.append("the leading space")
    elif a.replace("␣", " ").strip() != a.replace("␣", " ") or b.replace("␣", " ").strip() != b.replace("␣", " "):
        differences.append("the spaces around them")
    return "in " + " and in ".join(differences) if differences else "only in their ids"


REPEAT_EXAMPLE = "The dog saw the cat and the man"


def repeat_example(tokenizer: Tokenizer, text: str = REPEAT_EXAMPLE) -> tuple[str, int] | None:
    """The token of `text` worth pointing at as "occurs N times" in the model's own tokenizer, and N:
    ("␣the", 2) with GPT-2's, ("a", 4) with a character vocabulary (the longest repeated token, leaving
    out bare whitespace, then the most frequent). None when no token repeats (or the text has no
    character the vocabulary knows)."""
    ids, _ = tokenizer.encode_known(text)
    counts = Counter(ids)
    repeated = [i for i in counts if counts[i] > 1]
    if not repeated:
        return None
    shown = dict(zip(ids, (visible(t) for t in tokenizer.token_strings(ids))))
    best = max(repeated, key=lambda i: (len(shown[i].strip("␣↵⇥")), counts[i], -ids.index(i)))
    return shown[best], counts[best]


def heatmaps_title(view: EmbeddingView, *, scheme: str) -> str:
    """ "Token rows + position rows = summed rows (learned, 5 tokens, 128 dimensions)"."""
    T, C = view.token_rows.shape
    return f"Token rows + position rows = summed rows ({scheme}, {T} token{'s' if T != 1 else ''}, {C} dimensions)"


PANEL_TITLES = ("token rows", "+ position rows", "= summed rows (input to block 1)")
PANEL_SCALE = dict(orientation="h", x=0.5, xanchor="center", y=0.01, yref="container", yanchor="bottom", thickness=10,
                   len=0.8)  # the same zmin and zmax in every panel: the same scale


def embedding_panels(view: EmbeddingView, *, scheme: str) -> list[go.Figure]:
    """The three tables as three figures (token, position, summed rows) on one shared colour scale,
    for a page to put side by side in columns that a phone stacks: one figure of three subplots
    cannot reflow, and at 400 px its titles overprint. Each panel has its own row labels, so a stacked
    panel still reads alone; each drawn panel has the scale under it, the same for all three. An empty position
    panel says why.
    """
    T, C = view.token_rows.shape
    labels = position_labels(view.tokens)
    panels = dict(zip(PANEL_NAMES, (view.token_rows, view.position_rows, view.summed_rows)))
    limit = max(float(np.abs(rows).max()) for rows in panels.values() if rows is not None) if T else 1.0
    plot_height = min(max(28 * T, 140), 720)  # as embedding_heatmaps
    step = tick_step(T, pixels=plot_height)
    figures = []
    for col, ((name, rows), title) in enumerate(zip(panels.items(), PANEL_TITLES), start=1):
        fig = go.Figure()
        if rows is None:
            fig.add_annotation(text=nothing_added(scheme), xref="paper", yref="paper",
                               x=0.5, y=0.5, showarrow=False, font=dict(size=13))
            fig.update_xaxes(visible=False)
            fig.update_yaxes(visible=False)
            fig.update_layout(plot_bgcolor="#f4f4f4")
        else:
            fig.add_trace(go.Heatmap(
                z=rows, y=labels, zmin=-limit, zmax=limit, colorscale=DIVERGING, colorbar=PANEL_SCALE, name=name,
                hovertemplate=f"{name}<br>position %{{y}}<br>dimension %{{x}}<br>value %{{z:.4f}}<extra></extra>"))
            fig.update_xaxes(title_text="embedding dimension", range=[-0.5, C - 0.5])
            fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=labels[::step],
                             ticktext=labels[::step], tickfont=dict(size=11 if T <= 40 else 10))
        figures.append(finish(fig, title=title, height=plot_height + 190).update_layout(margin_b=70))
    return figures


# the one colour scale, under the figure across its width: beside the third panel it would read as that panel's
# alone, and on a phone it would take a third of the width
SHARED_SCALE = dict(PANEL_SCALE, len=0.6)


def embedding_heatmaps(view: EmbeddingView, *, scheme: str) -> go.Figure:
    """Token rows, position rows and summed rows side by side, one shared colour scale.

    Rows are positions (labelled "3 ␣the"), columns embedding dimensions. For rope, alibi and
    none the middle panel is empty and says why.
    """
    T, C = view.token_rows.shape
    labels = position_labels(view.tokens)
    panels = dict(zip(PANEL_NAMES, (view.token_rows, view.position_rows, view.summed_rows)))
    limit = max(float(np.abs(rows).max()) for rows in panels.values() if rows is not None) if T else 1.0
    fig = subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                   subplot_titles=["token rows", "+ position rows", "= summed rows (input to block 1)"])
    for col, (name, rows) in enumerate(panels.items(), start=1):
        fig.update_xaxes(title_text="embedding dimension", range=[-0.5, C - 0.5], row=1, col=col)
        if rows is None:  # paper coordinates: an axis with no trace has no domain to refer to
            left, right = fig.layout[f"xaxis{col}"].domain
            fig.add_shape(type="rect", xref="paper", yref="paper", x0=left, x1=right, y0=0, y1=1,
                          fillcolor="#f4f4f4", line=dict(width=0), layer="below")
            fig.add_annotation(text=nothing_added(scheme), xref="paper", yref="paper",
                               x=(left + right) / 2, y=0.5, showarrow=False, font=dict(size=13))
            continue
        fig.add_trace(
            go.Heatmap(z=rows, y=labels, zmin=-limit, zmax=limit, colorscale=DIVERGING, showscale=col == 3,
                       colorbar=SHARED_SCALE, name=name,
                       hovertemplate=f"{name}<br>position %{{y}}<br>dimension %{{x}}<br>"
                                     "value %{z:.4f}<extra></extra>"),
            row=1, col=col,
        )
    plot_height = min(max(28 * T, 140), 700)  # 28 px a row while it fits, then rows shrink
    step = tick_step(T, pixels=plot_height)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=labels[::step], ticktext=labels[::step],
                     tickfont=dict(size=11 if T <= 40 else 10))
    fig.update_yaxes(title_text="position and token" + (f" (a label every {step} rows)" if step > 1 else ""),
                     row=1, col=1)
    finish(fig, title=heatmaps_title(view, scheme=scheme), height=plot_height + 200)
    return fig.update_layout(margin=dict(b=70))  # room for the shared scale under the three panels
