"""The Similarity and Stretching pages' captions: the RoPE kernel caption is read off the drawn
line (for the shipped 32-column heads and a Llama's 64-column ones at base 500,000), and section 4
shows written text as text: user markup literal, the end-of-text token a visible label."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import app_test
from lpos import checkpoints
from lpos.analysis import similarity
from lpos.tokenizer import END_OF_TEXT, END_OF_TEXT_ID, encode

shipped = pytest.mark.skipif(not {"rope", "learned"} <= set(checkpoints.available()), reason="needs shipped models")


def numbers(text: str) -> list[float]:
    return [float(n.replace("−", "-")) for n in re.findall(r"−?-?\d+\.\d+", text)]


@pytest.mark.parametrize("head_dim, base, length", [(32, 10000.0, 128), (32, 10000.0, 1024), (64, 500000.0, 1024),
                                                    (64, 10000.0, 128)])
def test_the_kernel_sentence_gives_the_drawn_lines_range_past_distance_10(head_dim, base, length):
    line = similarity.rope_kernel_by_offset(length - 1, head_dim, base=base)
    said = similarity.rope_kernel_sentence(line, head_dim=head_dim, base=base)
    far = line["similarity"].to_numpy()[10:]
    at_10, low, high = numbers(said.split("\n")[1])[:3]
    assert at_10 == pytest.approx(line["similarity"][10], abs=0.005)
    assert (low, high) == (pytest.approx(far.min(), abs=0.005), pytest.approx(far.max(), abs=0.005))
    assert f"from distance 10 to {length - 1}" in said and f"{head_dim // 2} frequency pairs" in said
    assert "only when all the vector's pairs have the same length" in said
    assert "scrambled" not in said and "decaying wobble" not in said
    negative = np.flatnonzero(line["similarity"].to_numpy() < 0)
    if len(negative):  # 32 columns at base 10,000 first dip below 0 at distance 474
        assert f"first drops below 0 at distance {negative[0]}." in said and far.min() < 0
    else:  # the Llama's kernel and the shipped one over 128 positions stay well above 0
        assert "stays above 0 over this whole range" in said and far.min() > 0.2


def test_the_kernel_sentence_on_the_shortest_slider():
    """The slider starts at 2 positions: the line ends before distance 10, and the sentence says where."""
    for length in (2, 11):
        line = similarity.rope_kernel_by_offset(length - 1, 32, base=10000.0)
        said = similarity.rope_kernel_sentence(line, head_dim=32, base=10000.0)
        assert said.endswith(f"{line['similarity'].iloc[-1]:.2f} at distance {length - 1}, the farthest drawn.")


@shipped
def test_the_similarity_page_prints_the_kernel_reading_for_the_slider():
    at = app_test(page="pages/similarity.py", scheme="rope", model="rope")
    at.slider(key="sim_length_1024").set_value(1024).run()
    text = "\n".join(c.value for c in at.caption)
    assert "from distance 10 to 1023" in text and "first drops below 0 at distance 474" in text
    assert "scrambled" not in text and not at.exception


def test_written_text_is_text_and_a_separator_is_a_label():
    from lpos.ui.stretch import marked_text  # noqa: PLC0415

    prompt = encode("<b>Tom</b> said **hi**\n===\n    then <|endoftext|>")
    shown = marked_text(prompt, [END_OF_TEXT_ID] + encode(" Once"), length=8)
    assert END_OF_TEXT not in shown and "⏎ end of story" in shown
    assert r"\<b\>Tom\</b\>" in shown and r"\*\*hi\*\*" in shown and r"\=\=\=" in shown
    assert r"\<\|endoftext\|\>" in shown  # typed, it is seven ordinary tokens: shown as typed
    assert "⟦8 tokens: the training length ends here⟧" in shown
    assert "\u00a0" * 4 + "then" in shown  # four leading spaces would start a code block


@shipped
def test_section_4_shows_user_markup_literally_and_no_raw_end_of_text():
    at = app_test(page="pages/stretch.py", scheme="rope", model="rope", timeout=300)
    at.text_input(key="stretch_prompt").set_value("<b>Tom</b> said **hi**. And they lived happily ever after. The end.")
    at.slider(key="stretch_tokens").set_value(16)
    at.toggle(key="stretch_greedy").set_value(True)
    at.button(key="stretch_write").click().run()
    assert not at.exception
    written = [m.value for m in at.markdown if "Tom" in m.value]
    assert written and all(r"\<b\>Tom\</b\> said \*\*hi\*\*" in w for w in written)
    everything = "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)
    assert END_OF_TEXT not in everything
    assert any("⏎ end of story" in w for w in written)  # a finished story: some model writes the separator


def test_the_shift_sentence_says_which_schemes_could_not_be_shifted():
    """A 849-token story cannot sit at offset 64 in a 128-row table: the caption says learned cannot be shifted, not how much it changed."""
    from lpos.analysis.stretch import shift_sentence  # noqa: PLC0415

    long = shift_sentence([("learned", None), ("sinusoidal", 1.99), ("rope", 4.3e-6), ("alibi", 0.0), ("none", 0.0)],
                          tokens=849, offset=64)
    assert "learned cannot be shifted this far" in long and "learned and sinusoidal" not in long
    assert "sinusoidal adds a row for each absolute position" in long and "(largest change: sinusoidal 1.99)" in long
    assert "rope, alibi and none change at most 4.3e-06: float rounding" in long
    short = shift_sentence([("learned", 3.11), ("sinusoidal", 2.85), ("rope", 2.9e-6), ("alibi", 0.0), ("none", 0.0)],
                           tokens=5, offset=64)
    assert "learned and sinusoidal add a row" in short and "cannot be shifted" not in short
    assert "more than float rounding" in shift_sentence([("rope", 0.5)], tokens=5, offset=1)


@pytest.mark.parametrize("offset", [8, 512])
@pytest.mark.skipif("fire" not in checkpoints.available(), reason="checkpoints/fire.pt is not shipped")
def test_the_shift_sentence_groups_each_scheme_by_its_measured_change(offset):
    """FIRE adds no row, yet its normaliser max(L, i + 1) reads where the query sits once the sentence passes L
    (about 127 trained): its group follows what the model measures at the offset, never a list of relative schemes."""
    from lpos.analysis.stretch import ROUNDING, offset_change, shift_sentence  # noqa: PLC0415
    from lpos.model import untrained_model  # noqa: PLC0415

    ids = encode("The dog bit the man.")
    models = {"rope": untrained_model("rope"), "fire": checkpoints.load("fire")[0], "sinusoidal": untrained_model("sinusoidal")}
    changes = [(s, offset_change(model, ids, offset=offset)) for s, model in models.items()]
    said = shift_sentence(changes, tokens=len(ids), offset=offset)
    fire = dict(changes)["fire"]
    rounding = said[said.index("Your sentence"):].split(". ")[1]
    assert ("fire" in rounding) == (fire < ROUNDING) and "rope" in rounding and "sinusoidal" not in rounding
    assert (fire >= ROUNDING) == (offset == 512)
    if fire >= ROUNDING:
        assert f"fire adds no row for an absolute position, yet its change is more than float rounding (fire {fire:.2f})" in said


@shipped
def test_the_shift_caption_on_a_long_story():
    from lpos.corpus import story  # noqa: PLC0415

    at = app_test(page="pages/stretch.py", scheme="rope", model="rope", text=story()[:3200], timeout=300)
    caption = next(c.value for c in at.caption if c.value.startswith("Your sentence"))
    tokens = int(re.search(r"\((\d+) tokens\)", caption).group(1))
    assert tokens > 600 and "learned cannot hold your sentence even at offset 0" in caption and not at.exception
    assert "shifted this far" not in caption  # it cannot hold the text at all, shift or no shift


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="needs the learned-32 checkpoint")
def test_the_pca_caption_of_a_short_window_table_names_its_random_rows():
    """learned-32's rows 32-127 never trained: the caption reads the trained rows and the random ones apart."""
    at = app_test(page="pages/similarity.py", scheme="learned", model="learned-32")
    text = "\n".join(c.value for c in at.caption)
    assert "Rows 0–31, trained: in the whole rows" in text and "Rows 32–127, never trained and still random" in text
    ratio = float(re.search(r"random, ([0-9.]+)× as long", text).group(1))
    model, _ = checkpoints.load("learned-32")
    rows = similarity.position_rows(model, 128)
    lengths = np.linalg.norm(rows, axis=1)
    assert ratio == pytest.approx(lengths[32:].mean() / lengths[:32].mean(), abs=0.005) and ratio < 0.2
    trained, untrained = text.split("Rows 32–127")[0], text.split("Rows 32–127")[1]
    assert "they run in position order" in trained and "a cloud with no order" in untrained.split("\n")[0]
    assert "The second map is this model's own table at step 0" in text and "or a random draw" not in text


@pytest.mark.skipif("learned-rand" not in checkpoints.available(), reason="needs the learned-rand checkpoint")
def test_the_pca_caption_measures_order_in_the_whole_rows_not_the_three_drawn_components():
    """learned-rand's three components hold about 63% of its 1,024 rows' variance: the path drawn looks more
    orderly than the rows are."""
    from lpos.ui.models import LoadedModel, load_offered  # noqa: PLC0415
    from lpos.ui.similarity import pca_reading, step_ratio  # noqa: PLC0415

    model, meta = load_offered("learned-rand")
    rows = similarity.position_rows(model, 1024)
    _, said = pca_reading(LoadedModel("learned-rand", "learned-rand", model, meta), 1024)
    ratio = float(re.search(r"sit ([0-9.]+)× as far apart", said).group(1))
    assert ratio == pytest.approx(step_ratio(rows), abs=0.005)
    assert ratio > step_ratio(similarity.pca(rows, components=3).coordinates) + 0.1  # the drawn path looks tidier
    assert f"in the whole rows (all {rows.shape[1]} dimensions, not only the three drawn)" in said


def test_the_pca_caption_measures_the_order_of_the_path():
    from lpos.ui.similarity import order_sentence, step_ratio  # noqa: PLC0415

    line = np.arange(20.0)[:, None] * np.ones((1, 3))  # evenly spaced on a line: 3/(n+1)
    assert step_ratio(line) == pytest.approx(3 / 21)
    assert "they run in position order" in order_sentence(line, rows="x")
    cloud = np.random.default_rng(0).standard_normal((128, 3))
    assert step_ratio(cloud) == pytest.approx(1.0, abs=0.1)
    assert "a cloud with no order" in order_sentence(cloud, rows="x")
    random_rows = similarity.initial_position_rows(128, 128)
    from lpos.ui.similarity import pca_sentence  # noqa: PLC0415
    said = pca_sentence(random_rows, similarity.pca(random_rows, components=3), scheme="learned", trained=False, limit=None)
    assert said.startswith("The first three components explain") and "These rows are random (untrained)" in said
    assert "a cloud with no order" in said
