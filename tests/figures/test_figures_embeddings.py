"""lpos.figures.embeddings: the chips (read back from their HTML) and the three heatmaps, checked on their data."""
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import numpy as np
import pytest

from lpos.analysis.embeddings import EmbeddingView, embedding_view
from lpos.figures.common import position_labels, safe, tick_step
from lpos.figures.embeddings import (CHIP_CSS, CHIP_LIMIT, CHIP_TEXT_CHARS, NEVER_SEEN, chip_text, embedding_heatmaps,
                                     short_count, token_chips_html)
from lpos.tokenizer import encode

CHIP_TAGS = {"style", "div", "span"}  # all the chips' HTML may hold
CHIP_ATTRIBUTES = {"class", "role", "title"}


@dataclass
class Chip:
    kind: str  # "seen", "never" or "no-counts", from the chip's class
    tooltip: str
    text: str = ""
    meta: str = ""


@dataclass
class Chips(HTMLParser):
    """The chips' HTML read back as a browser reads it: every tag with its attributes, the title, each chip."""
    tags: list = field(default_factory=list)
    chips: list = field(default_factory=list)
    title: str = ""
    reading: str | None = None  # "title", "text" or "meta": where the next text belongs

    def __post_init__(self):
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        classes = (attrs.get("class") or "").split()
        if "lpos-chip" in classes:
            kind = next(c.removeprefix("lpos-chip-") for c in classes if c != "lpos-chip")
            self.chips.append(Chip(kind=kind, tooltip=attrs["title"]))
        self.reading = ("title" if "lpos-chips-title" in classes else "text" if "lpos-chip-text" in classes
                        else "meta" if "lpos-chip-meta" in classes else None)

    def handle_endtag(self, tag):
        self.reading = None

    def handle_data(self, data):
        if self.reading == "title":
            self.title += data
        elif self.reading:
            setattr(self.chips[-1], self.reading, getattr(self.chips[-1], self.reading) + data)


def read_chips(page: str) -> Chips:
    chips = Chips()
    chips.feed(page)
    chips.close()
    return chips


def unsafe_markup(chips: Chips) -> list[str]:
    """Tags or attributes the chips never write themselves: user text a browser would take as markup."""
    return [f"<{tag} {sorted(attrs)}>" for tag, attrs in chips.tags
            if tag not in CHIP_TAGS or set(attrs) - CHIP_ATTRIBUTES]


def handmade_view(tokens, *, counts=None, width=4, positions=True) -> EmbeddingView:
    T = len(tokens)
    token_rows = np.arange(T * width, dtype=np.float32).reshape(T, width) / 10 - 0.5
    position_rows = np.full((T, width), 0.25, dtype=np.float32) if positions else None
    return EmbeddingView(ids=list(range(100, 100 + T)), tokens=tokens, token_rows=token_rows,
                         position_rows=position_rows,
                         summed_rows=token_rows + position_rows if positions else token_rows,
                         counts=counts if counts is not None else [None] * T)


def heatmaps_of(fig):
    return [trace for trace in fig.data if trace.type == "heatmap"]


def test_three_panels_share_one_colour_scale():
    view = handmade_view(["A", "␣cat", "␣sat"])
    fig = embedding_heatmaps(view, scheme="learned")
    traces = heatmaps_of(fig)
    assert [t.name for t in traces] == ["token rows", "position rows", "summed rows"]
    limit = float(np.abs(view.summed_rows).max())  # the largest |value| over all three panels
    assert {(t.zmin, t.zmax) for t in traces} == {(-limit, limit)}
    np.testing.assert_array_equal(traces[0].z, view.token_rows)
    np.testing.assert_array_equal(traces[1].z, view.position_rows)
    np.testing.assert_array_equal(traces[2].z, view.summed_rows)
    assert [t.showscale for t in traces] == [False, False, True]
    assert list(traces[0].y) == ["0 A", "1 ␣cat", "2 ␣sat"]
    assert all("value %{z:.4f}" in t.hovertemplate for t in traces)


def test_axis_labels_and_title():
    fig = embedding_heatmaps(handmade_view(["A", "B"]), scheme="sinusoidal")
    assert [fig.layout[f"xaxis{i}"].title.text for i in ("", "2", "3")] == ["embedding dimension"] * 3
    assert fig.layout.yaxis.title.text == "position and token"
    assert "sinusoidal, 2 tokens, 4 dimensions" in fig.layout.title.text


@pytest.mark.parametrize("scheme, reason", [("rope", "RoPE adds nothing"), ("alibi", "ALiBi adds nothing"),
                                            ("none", "No position rows")])
def test_empty_position_panel_says_why(scheme, reason):
    fig = embedding_heatmaps(handmade_view(["A", "B"], positions=False), scheme=scheme)
    assert [t.name for t in heatmaps_of(fig)] == ["token rows", "summed rows"]
    notes = [a.text for a in fig.layout.annotations if reason in a.text]
    assert len(notes) == 1
    note = next(a for a in fig.layout.annotations if reason in a.text)
    assert note.x == pytest.approx(sum(fig.layout.xaxis2.domain) / 2)  # centred on the middle panel


def test_heatmap_token_text_is_escaped():
    heatmaps = embedding_heatmaps(handmade_view(["<script>", "<b>x</b>"], counts=[3, 0]), scheme="learned")
    labels = list(heatmaps_of(heatmaps)[0].y)
    assert labels == ["0 &lt;script&gt;", "1 &lt;b&gt;x&lt;/b&gt;"]
    assert list(heatmaps.layout.yaxis.ticktext) == labels
    assert safe("a < b & c") == "a &lt; b &amp; c"


def test_short_sentences_get_tall_rows_and_every_label(tiny_model):
    view = embedding_view(tiny_model("learned"), encode("The dog bit the man"))
    fig = embedding_heatmaps(view, scheme="learned")
    assert list(fig.layout.yaxis.tickvals) == position_labels(view.tokens)
    assert 300 <= fig.layout.height <= 340  # 140 px of rows at least, plus title and axes


def test_long_sentences_stay_on_screen_with_thinned_labels(tiny_model):
    view = embedding_view(tiny_model("sinusoidal"), list(range(1000, 1120)))
    fig = embedding_heatmaps(view, scheme="sinusoidal")
    assert fig.layout.height <= 900
    ticks = list(fig.layout.yaxis.tickvals)
    step = tick_step(120, pixels=720)
    assert step == 3 and ticks == position_labels(view.tokens)[::3]
    assert len(ticks) * 14 <= 720  # labels at least 14 px apart
    assert "a label every 3 rows" in fig.layout.yaxis.title.text


def test_short_count():
    assert [short_count(n) for n in (7, 2_907, 38_826, 1_234_567)] == ["7×", "2,907×", "38.8k×", "1.2M×"]


HOSTILE_TOKENS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", '" onmouseover="alert(1)',
                  "'><svg onload=alert(1)>", "&amp;", "&lt;b&gt;", "🙂", "<|endoftext|>", "␣␣␣", "↵↵", "\r",
                  "</style>"]


def test_hostile_tokens_are_text_in_every_chip():
    page = token_chips_html(handmade_view(HOSTILE_TOKENS, counts=list(range(len(HOSTILE_TOKENS)))))
    assert "<script" not in page and "<img" not in page and "<svg" not in page
    assert page.count("</style>") == 1  # the chips' own stylesheet ends once; a token cannot end it
    assert "“&quot; onmouseover=&quot;alert(1)”" in page  # quotes cannot close the tooltip's attribute
    assert "&#x27;&gt;&lt;svg onload=alert(1)&gt;" in page
    assert "\r" not in page  # a browser would read a raw carriage return as a newline
    chips = read_chips(page)
    assert unsafe_markup(chips) == []
    assert [c.text for c in chips.chips] == [chip_text(t) for t in HOSTILE_TOKENS]  # read back as typed
    assert [c.tooltip.split("\n")[1] for c in chips.chips] == \
        [f"token “{t}” ({len(t)} character{'' if len(t) == 1 else 's'})" for t in HOSTILE_TOKENS]


def test_chips_show_text_id_and_count():
    view = handmade_view(["␣the", "␣zyx"], counts=[38_826, 0])
    chips = read_chips(token_chips_html(view))
    assert [(c.text, c.meta) for c in chips.chips] == [("␣the", "id 100 · 38.8k×"),
                                                       ("␣zyx", "id 101 · never seen")]
    assert chips.chips[0].tooltip == ("position 0\ntoken “␣the” (4 characters)\nid 100\n"
                                      "occurs 38,826 times in the training text")
    assert chips.chips[1].tooltip.endswith(f"id 101\n{NEVER_SEEN}")
    assert chips.title == "2 tokens: text (␣ = space), GPT-2 id, occurrences in the training text; red = never seen"


def test_never_seen_chips_are_red_and_say_so():
    chips = read_chips(token_chips_html(handmade_view(["a", "b", "c"], counts=[5, 0, 1])))
    assert [c.kind for c in chips.chips] == ["seen", "never", "seen"]
    assert [c.meta.endswith("never seen") for c in chips.chips] == [False, True, False]  # a text cue, not colour only
    never_rule = re.search(r"\.lpos-chip-never \{([^}]*)\}", CHIP_CSS).group(1)
    assert "rgb(220, 53, 69)" in never_rule and "border" in never_rule


def test_untrained_chips_have_no_count_line():
    chips = read_chips(token_chips_html(handmade_view(["A", "B"])))
    assert [(c.text, c.meta, c.kind) for c in chips.chips] == [("A", "id 100", "no-counts"),
                                                               ("B", "id 101", "no-counts")]
    assert chips.title == "2 tokens: text (␣ = space) and GPT-2 id; no training counts for this model"
    assert chips.chips[0].tooltip.endswith("no training counts for this model")


def test_long_tokens_are_cut_on_the_chip_and_whole_in_the_tooltip():
    token = "␣" + "x" * 30
    chip = read_chips(token_chips_html(handmade_view([token], counts=[1]))).chips[0]
    assert chip.text == chip_text(token) and len(chip.text) == CHIP_TEXT_CHARS and chip.text.endswith("…")
    assert f"token “{token}” (31 characters)" in chip.tooltip
    assert chip_text("␣short") == "␣short"


def test_a_split_character_is_named_in_the_tooltip():
    chip = read_chips(token_chips_html(handmade_view(["‹F0 9F 98 of 😀›"], counts=[2]))).chips[0]
    assert "(part of a character split across tokens)" in chip.tooltip.split("\n")


def test_the_heatmaps_title_counts_one_token_in_the_singular():
    from lpos.figures.embeddings import heatmaps_title

    assert "(learned, 1 token, 4 dimensions)" in heatmaps_title(handmade_view(["Hi"]), scheme="learned")
    assert "(learned, 2 tokens, 4 dimensions)" in heatmaps_title(handmade_view(["Hi", "!"]), scheme="learned")


def test_a_piece_of_a_character_keeps_the_character_on_its_chip():
    from lpos.tokenizer import token_strings, visible

    shown = [chip_text(visible(t)) for t in token_strings(encode(" 🐶 ’"))]  # cut at the width: "‹90 of …"
    assert shown == ["␣‹F0…🐶›", "‹90…🐶›", "‹B6…🐶›", "␣‹E2…’›", "‹99…’›"]
    assert all(len(text) <= CHIP_TEXT_CHARS for text in shown)
    assert chip_text("‹E2 80 99 8C 9A 7F›") == "‹E2 80 99 8C 9A 7F›"  # no character to keep: the label stays whole


@pytest.mark.parametrize("count, cut", [(5, ""), (CHIP_LIMIT, ""),
                                        (CHIP_LIMIT + 50, f" (the first {CHIP_LIMIT} of {CHIP_LIMIT + 50})")])
def test_chip_limit_and_title(count, cut):
    chips = read_chips(token_chips_html(handmade_view([f"t{i}" for i in range(count)])))
    assert len(chips.chips) == min(count, CHIP_LIMIT)
    assert chips.chips[-1].text == f"t{min(count, CHIP_LIMIT) - 1}"
    assert chips.title == f"{count} tokens{cut}: text (␣ = space) and GPT-2 id; no training counts for this model"


def test_no_tokens_draws_a_title_and_no_chips():
    chips = read_chips(token_chips_html(handmade_view([])))
    assert chips.title.startswith("0 tokens: ") and chips.chips == []
    assert unsafe_markup(chips) == []


def test_the_page_panels_are_three_figures_on_one_scale_each_readable_alone():
    """Three figures a phone can stack (one figure of three subplots overprinted its titles at 400 px)."""
    from lpos.figures.embeddings import embedding_panels

    view = handmade_view(["A", "␣cat", "␣sat"])
    panels = embedding_panels(view, scheme="learned")
    assert [p.layout.title.text for p in panels] == ["token rows", "+ position rows", "= summed rows (input to block 1)"]
    traces = [t for p in panels for t in heatmaps_of(p)]
    limit = float(np.abs(view.summed_rows).max())
    assert {(t.zmin, t.zmax) for t in traces} == {(-limit, limit)}
    # each panel carries the one scale under it: stacked on a phone, a panel still reads alone
    assert [t.showscale for t in traces] == [None] * 3 and all(t.colorbar.orientation == "h" for t in traces)
    assert all(list(p.layout.yaxis.ticktext) == ["0 A", "1 ␣cat", "2 ␣sat"] for p in panels)  # labels on each
    assert all(tuple(p.layout.xaxis.range) == (-0.5, 3.5) for p in panels)  # the data, no padding
    empty = embedding_panels(handmade_view(["A", "B"], positions=False), scheme="rope")[1]
    assert not empty.data and "RoPE adds nothing" in empty.layout.annotations[0].text


def test_position_share_is_the_position_rows_part_of_the_scale():
    from lpos.analysis.embeddings import position_share

    view = handmade_view(["A", "B"])  # token rows -0.5..0.2, position rows 0.25, sums up to 0.45
    assert position_share(view) == pytest.approx(0.25 / 0.5)
    assert position_share(handmade_view(["A", "B"], positions=False)) is None


def test_chips_name_a_learners_own_vocabulary():
    """A character model's chips are its own ids, not GPT-2's: the title says whose."""
    from lpos.analysis.embeddings import EmbeddingView
    from lpos.figures.embeddings import chips_title

    view = EmbeddingView(ids=[3, 4], tokens=["a", "b"], token_rows=np.zeros((2, 4)), position_rows=None,
                         summed_rows=np.zeros((2, 4)), counts=[None, None], tokenizer_name="characters of input.txt (31)")
    assert chips_title(view) == ("2 tokens: text (␣ = space) and id in the model's own vocabulary; no training "
                                 "counts for this model; vocabulary: characters of input.txt (31)")


def test_one_token_is_said_in_the_singular():
    from lpos.analysis.embeddings import EmbeddingView
    from lpos.figures.embeddings import chips_title

    view = EmbeddingView(ids=[3], tokens=["a"], token_rows=np.zeros((1, 4)), position_rows=None,
                         summed_rows=np.zeros((1, 4)), counts=[None])
    assert chips_title(view).startswith("1 token: ")


def test_the_red_chips_caption_names_only_chips_drawn_and_counts_the_rest():
    from lpos.analysis.embeddings import never_seen
    from lpos.figures.embeddings import unseen_caption

    tokens = [f"t{i}" for i in range(CHIP_LIMIT + 3)]
    counts = [0 if i in (2, CHIP_LIMIT, CHIP_LIMIT + 2) else 1 for i in range(len(tokens))]
    view = handmade_view(tokens, counts=counts)
    said = unseen_caption(view, never_seen(view), literal=str)
    assert said == (f"Red chips, {NEVER_SEEN}: “t2” (position 2); 2 tokens past the {CHIP_LIMIT} chips drawn never "
                    "occur in training either.")
    late = handmade_view(tokens, counts=[0 if i == CHIP_LIMIT + 1 else 1 for i in range(len(tokens))])
    assert unseen_caption(late, never_seen(late), literal=str) == (
        f"No chip drawn is red; 1 token past the {CHIP_LIMIT} chips drawn never occurs in training either.")
    twelve = handmade_view(tokens[:12], counts=[0] * 12)
    assert unseen_caption(twelve, never_seen(twelve), literal=str).endswith("“t9” (position 9) and 2 more.")
