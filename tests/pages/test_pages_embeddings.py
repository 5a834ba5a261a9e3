"""The Embeddings page through AppTest from app.py: what a learner reads for each kind of input."""
import json

import pytest
from conftest import app_test
from test_figures_embeddings import Chips, read_chips, unsafe_markup

from lpos import checkpoints
from lpos.analysis.embeddings import token_counts
from lpos.figures.embeddings import short_count
from lpos.tokenizer import encode

PAGE = "pages/embeddings.py"


def figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def chips(at) -> Chips:
    """The token chips: the page's one st.html element, read back."""
    (element,) = at.get("html")
    return read_chips(element.proto.body)


def chips_title(at) -> str:
    return chips(at).title


def typed(at, text: str):
    at.text_area(key="sentence").set_value(text).run()
    assert not at.exception
    return at


def test_default_sentence_shows_its_tokens_and_explains_lookalikes():
    at = app_test(scheme="learned", model="untrained")
    assert not at.exception
    assert chips_title(at).startswith("5 tokens:")
    assert [c.text for c in chips(at).chips] == ["The", "␣dog", "␣bit", "␣the", "␣man"]
    assert len(figures(at)) == 3  # token, position and summed rows, in columns; the chips are HTML
    assert [t["name"] for f in figures(at) for t in f["data"] if t["type"] == "heatmap"] == \
        ["token rows", "position rows", "summed rows"]
    lookalike = at.info[0].value
    assert "No token occurs twice" in lookalike and "(id 464)" in lookalike and "(id 262)" in lookalike
    assert any("Untrained model" in c.value for c in at.caption)


def test_a_repeated_token_gets_identical_token_rows_and_different_sums():
    at = typed(app_test(scheme="sinusoidal", model="untrained"), "The dog saw the cat and the man")
    assert chips_title(at).startswith("8 tokens:")
    assert len(at.success) == 1
    note = at.success[0].value
    assert "at positions 3 and 6" in note and "largest difference 0)" in note and "cosine similarity" in note


@pytest.mark.skipif("learned-rand" not in checkpoints.available(), reason="checkpoints/learned-rand.pt is not shipped")
def test_a_table_read_at_random_positions_names_the_rows_it_adds():
    at = typed(app_test(scheme="learned", model="learned-rand"), "The dog saw the cat and the man")
    model = checkpoints.load("learned-rand")[0]
    rows = model.scheme.input_positions(model.config, 8, 0).tolist()
    note = at.success[0].value
    assert f"at positions 3 and 6 (table rows {rows[3]:,} and {rows[6]:,})" in note, note


def test_without_positions_the_repeat_is_identical_and_the_page_links_to_where_rope_acts():
    at = typed(app_test(scheme="rope", model="untrained"), "The dog saw the cat and the man")
    assert "nothing is added, so the summed rows are identical too (cosine 1.0000)" in at.info[0].value
    links = at.get("page_link")
    assert [link.proto.page for link in links] == ["attention"]
    position_panel = figures(at)[1]
    assert not position_panel["data"] and "RoPE adds nothing" in position_panel["layout"]["annotations"][0]["text"]


def test_an_empty_position_panel_offers_no_numbers_and_no_snippet():
    def downloads(at) -> list[str]:
        return [b.proto.id for b in at.get("download_button")]

    rope = app_test(scheme="rope", model="untrained")
    assert not any("heatmaps_position_csv" in d for d in downloads(rope))  # nothing drawn: nothing to give
    assert any("heatmaps_token_csv" in d for d in downloads(rope)) and any("heatmaps_summed_csv" in d for d in downloads(rope))
    learned = app_test(scheme="learned", model="untrained")
    assert any("heatmaps_position_csv" in d for d in downloads(learned))


def test_no_positions_links_to_order_blindness():
    at = app_test(scheme="none", model="untrained")
    assert [link.proto.page for link in at.get("page_link")] == ["shuffle"]


def test_learned_table_stops_at_128_and_shows_the_first_128_by_default():
    text = " ".join(["word"] * 129)
    assert len(encode(text)) == 129
    at = typed(app_test(scheme="learned", model="untrained"), text)
    assert "The learned table has 128 rows; your text has 129 tokens" in at.warning[0].value
    assert "shows the first 128 tokens and leaves the other 1 out" in at.warning[0].value
    assert not at.exception and chips_title(at).startswith("128 tokens")  # drawn at once, said so
    at.toggle(key="truncate_learned").set_value(False).run()
    assert not at.get("plotly_chart") and not at.get("html")  # off: nothing drawn


def test_other_schemes_take_long_text_as_it_is():
    at = typed(app_test(scheme="sinusoidal", model="untrained"), " ".join(["word"] * 300))
    assert not at.warning
    assert chips_title(at).startswith("300 tokens (the first 200 of 300)")
    assert len(chips(at).chips) == 200
    heatmaps = [t for t in figures(at)[0]["data"] if t["type"] == "heatmap"]
    assert len(heatmaps[0]["y"]) == 300


def test_empty_text_asks_for_a_sentence():
    at = typed(app_test(model="untrained"), "")
    assert "Type a sentence in the sidebar" in at.info[0].value
    assert not at.get("plotly_chart") and not at.get("html")


def test_html_is_shown_as_text_never_rendered():
    at = typed(app_test(scheme="learned", model="untrained"), "<script>alert(1)</script> and <script>")
    spec = json.dumps(figures(at))
    assert "<script" not in spec and "&lt;" in spec
    body = at.get("html")[0].proto.body
    assert "<script" not in body and "&lt;script&gt;" not in body  # GPT-2 splits "<script>" into three tokens
    assert unsafe_markup(chips(at)) == []
    assert [c.text for c in chips(at).chips][:3] == ["<", "script", ">"] and "␣<" in [c.text for c in chips(at).chips]
    assert all(not m.proto.allow_html for m in at.markdown)
    quoted = [s.value for s in at.success]  # "script" and ">" repeat; ">" is quoted with a Markdown escape
    assert quoted[0].startswith("“script” occurs three times; at its first two, positions 1 and 7")
    assert quoted[1].startswith("“\\>” occurs three times; at its first two, positions 2 and 8")


def test_special_token_spelling_emoji_and_non_latin_text_work():
    at = typed(app_test(scheme="alibi", model="untrained"), "<|endoftext|> 你好 🙂 ça va")
    assert chips_title(at).startswith(f"{len(encode('<|endoftext|> 你好 🙂 ça va'))} tokens")
    ids = [int(c.meta.split()[1]) for c in chips(at).chips]
    assert ids == encode("<|endoftext|> 你好 🙂 ça va")
    assert 50256 not in ids  # the spelling is plain text, never the separator


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="checkpoints/learned.pt is not shipped")
def test_tokens_never_seen_in_training_are_red_chips_and_named():
    text = "<b>hi</b> the"
    at = typed(app_test(scheme="learned", model="learned"), text)
    counts = token_counts(checkpoints.load("learned")[1])
    expected = ["never" if counts.get(i, 0) == 0 else "seen" for i in encode(text)]
    assert "never" in expected and "seen" in expected  # the sentence has both kinds for this model
    drawn = chips(at).chips
    assert [c.kind for c in drawn] == expected
    assert [c.meta.endswith("never seen") for c in drawn] == [k == "never" for k in expected]
    assert [c.meta.split()[-1] for c in drawn if c.kind == "seen"] == \
        [short_count(counts[i]) for i in encode(text) if counts.get(i, 0)]
    assert any(c.value.startswith("Red chips, never seen in training") for c in at.caption)


def test_faint_position_rows_are_said_with_their_share_of_the_scale():
    """The shipped sinusoidal rows (x0.028) reach about 11% of the shared scale: the caption says so, with
    the number; learned rows (68%) get no such note. It used to say nothing, and the panel looked empty."""
    if "sinusoidal" not in checkpoints.available():
        pytest.skip("needs the shipped sinusoidal model")
    at = app_test(scheme="sinusoidal", model="sinusoidal")
    (note,) = [c.value for c in at.caption if "of the scale's end" in c.value]
    assert "reach only 11% of the scale's end" in note
    at = app_test(scheme="learned", model="learned")
    assert not [c.value for c in at.caption if "of the scale's end" in c.value]


def test_left_out_characters_are_said_in_the_main_area(tmp_path, monkeypatch):
    from conftest import app_test  # noqa: PLC0415
    from test_courses import converted_character_model  # noqa: PLC0415

    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(converted_character_model(tmp_path)))
    at = app_test(model="dir:chars.pt", scheme="learned", text="Speak, café!")
    assert not at.exception, [e.value for e in at.exception]
    main = [w.value for w in at.main.warning if "left out" in w.value]
    assert len(main) == 1 and "“é”" in main[0], [w.value for w in at.warning]


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="checkpoints/learned-32.pt is not shipped")
def test_rows_a_short_window_model_never_trained_are_said_when_the_text_reaches_them():
    from lpos.corpus import story  # noqa: PLC0415

    at = typed(app_test(scheme="learned", model="learned-32"), story()[:400])
    said = " ".join(c.value for c in at.caption)
    assert "learned-32 trained on windows of at most 32 tokens: the position rows from 32 on never received a gradient" in said
    short = typed(app_test(scheme="learned", model="learned-32"), "The dog bit the man")
    assert "never received a gradient" not in " ".join(c.value for c in short.caption)
