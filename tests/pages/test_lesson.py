"""The Lesson page: every step draws its figure for any sentence and scheme; the URL follows; each step's
sentences read the numbers they are written from."""
import json
import re

import pytest

from conftest import SCHEMES, app_test
from lpos import checkpoints
from lpos.lesson import STEPS
from lpos.tokenizer import encode

shipped = pytest.mark.skipif(not {"alibi", "learned", "none"} <= set(checkpoints.available()),
                             reason="the shipped checkpoints are not installed")

SENTENCES = ["The dog bit the man", "🦄 <script>alert(1)</script> the the banana"]


CHIPS_THEN_FIGURES = ["chips"] + ["figure"] * (len(STEPS) - 1)  # step 1 draws the token chips (st.html)


def walk(at) -> list[str]:
    """Click Next through every step; returns what each step drew: "chips", "figure", or what else."""
    drawn = []
    for step in range(1, len(STEPS) + 1):
        assert not at.exception, f"step {step}: {at.exception[0].message}"
        # Streamlit >= 1.67's AppTest gives a key seen once as a str (one-element lists collapse:
        # streamlit/testing/v1/app_test.py, _query_params_from_query_string); repeated keys stay lists.
        assert at.query_params["step"] == str(step)
        assert at.header[0].value == f"{step}. {STEPS[step - 1].title}"
        charts, pages = len(at.get("plotly_chart")), [e.proto.body for e in at.get("html")]
        drawn.append("chips" if (charts, len(pages)) == (0, 1) and 'class="lpos-chips"' in pages[0] else
                     "figure" if (charts, len(pages)) == (1, 0) else f"{charts} charts, {len(pages)} html")
        if step < len(STEPS):
            at.button(key="lesson_next").click().run()
    return drawn


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("text", SENTENCES)
def test_every_step_draws_its_figure(scheme, text):
    at = app_test(page="pages/lesson.py", text=text, scheme=scheme, model=scheme)
    assert walk(at) == CHIPS_THEN_FIGURES
    assert not at.warning, [w.value for w in at.warning]


def test_untrained_model_and_empty_text_still_teach():
    at = app_test(page="pages/lesson.py", text="", model="untrained")
    assert walk(at) == CHIPS_THEN_FIGURES


def test_step_comes_from_the_url_and_previous_goes_back():
    at = app_test(page="pages/lesson.py", step="4")
    assert at.header[0].value.startswith("4. ")
    assert "129" in at.markdown[-1].value or any("129" in m.value for m in at.markdown)  # the wall's error
    at.button(key="lesson_previous").click().run()
    assert at.query_params["step"] == "3"


def test_a_bad_step_in_the_url_is_refused_with_a_notice():
    at = app_test(page="pages/lesson.py", step="../../99")
    assert at.header[0].value.startswith("1. ")
    assert "no step" in at.warning[0].value


def test_presenter_mode_is_in_the_url_and_can_be_left():
    at = app_test(page="pages/lesson.py", step="10", presenter="1")
    assert at.query_params["presenter"] == "1"
    assert not at.title  # the page title is hidden; the step header remains
    at.button(key="leave_presenter").click().run()
    assert "presenter" not in at.query_params
    assert at.title


def test_presenter_mode_enlarges_the_figure_text_too():
    """The prose grew to 1.55rem but figure labels stayed 10-12 px (step 10's "." and "," nearly invisible)."""
    import json

    normal = json.loads(app_test(page="pages/lesson.py", step="10").get("plotly_chart")[0].proto.spec)
    big = json.loads(app_test(page="pages/lesson.py", step="10", presenter="1").get("plotly_chart")[0].proto.spec)
    assert normal["layout"].get("font", {}).get("size", 12) == 12 and big["layout"]["font"]["size"] == 18


def test_presenter_figure_scales_every_explicit_font_and_keeps_the_original():
    import plotly.graph_objects as go

    from lpos.ui.lesson import presenter_figure

    fig = go.Figure(go.Bar(x=[".", ","], y=[1, 2], text=[".", ","], textfont=dict(size=10)))
    fig.update_layout(xaxis_tickfont_size=11)
    fig.add_annotation(text="note", font=dict(size=13))
    big = presenter_figure(fig)
    assert (big.layout.font.size, big.data[0].textfont.size, big.layout.xaxis.tickfont.size,
            big.layout.annotations[0].font.size) == (18, 15, 16.5, 19.5)
    assert fig.layout.font.size is None and fig.data[0].textfont.size == 10  # the cached figure is untouched


def loaded_model(key: str):
    """A model as the app's loader gives it to a page: a shipped name, or the untrained model."""
    from lpos.ui.models import UNTRAINED, LoadedModel, label, load_offered, untrained  # noqa: PLC0415

    if key == UNTRAINED:
        return LoadedModel(UNTRAINED, "untrained", untrained("learned"), {})
    model, meta = load_offered(key)
    return LoadedModel(key, label(key), model, meta)


def test_step_3_says_a_repeated_token_as_the_embeddings_page_does():
    """One sentence for a repeated token (lpos.analysis.embeddings.repeat_sentence), in the lesson and on Embeddings."""
    from lpos.ui import lesson  # noqa: PLC0415

    text, model = "The dog saw the cat and the man", loaded_model("untrained")
    _, said = lesson.position_rows(model, model, encode(text))
    assert said.startswith("“␣the” occurs twice; at positions 3 and 6: identical token rows (largest difference 0), "
                           "different summed rows: cosine similarity ")
    page = app_test(page="pages/embeddings.py", text=text, scheme="learned", model="untrained")
    assert [box.value for box in page.success] == [said]


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="learned-32 is not installed")
def test_step_8_says_which_rows_never_trained_and_how_alike_the_rows_are():
    from lpos.ui import lesson  # noqa: PLC0415

    model = loaded_model("learned-32")
    _, said = lesson.learned_band(model, model, [])
    assert "rows 32–127 never received a gradient" in said and "mix 32 trained rows with 96 untrained ones" in said
    near = float(re.search(r"neighbouring rows have mean cosine (-?[0-9.]+)", said).group(1))
    far = float(re.search(r"rows 64 apart ([+-][0-9.]+)", said).group(1))
    assert near - far >= 0.2 and "near rows are much more alike than far ones" in said  # 0.22 against +0.02
    assert "pointing away" not in lesson.STEPS[7].notice  # the fixed claim the numbers did not bear out
    alone = float(re.search(r"rows 0–31 alone: neighbouring rows have mean cosine (-?[0-9]+\.[0-9]+)", said).group(1))
    assert alone > near  # the trained rows' band, not diluted by the untrained


def test_step_8_says_a_level_rows_64_apart_share_is_not_nearness():
    """Neighbours at 0.51 and rows 64 apart at 0.47 are not "alike" by nearness at that distance."""
    from lpos.ui import lesson  # noqa: PLC0415

    assert lesson._band(0.51, 0.47) == ("neighbouring rows have mean cosine 0.51, rows 64 apart +0.47: neighbours "
                                        "are only 0.04 more alike than rows 64 apart, which still share 0.47, so over "
                                        "64 rows nearness hardly shows (the map shows the wider pattern)")
    assert lesson._band(0.87, -0.29).endswith("near rows are much more alike than far ones")
    assert lesson._band(0.05, 0.01).endswith("neighbours are hardly more alike than far rows")
    assert lesson._band(0.95, None) == "neighbouring rows have mean cosine 0.95"


@pytest.mark.skipif("learned-rand" not in checkpoints.available(), reason="learned-rand is not installed")
def test_step_8_counts_a_randomized_tables_neighbours_in_rows_not_positions():
    from lpos.ui import lesson  # noqa: PLC0415

    model = loaded_model("learned-rand")
    _, said = lesson.learned_band(model, model, [])
    assert "among rows 0–1023, each row's 10 most similar rows sit" in said and " positions away" not in said


def test_step_8_on_the_untrained_model_says_both_maps_are_random():
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import UNTRAINED  # noqa: PLC0415

    model = loaded_model(UNTRAINED)
    assert not model.trained
    _, said = lesson.learned_band(model, model, [])
    assert said.startswith("This model is untrained") and "both maps are random rows" in said
    assert "trained table" not in lesson.STEPS[7].notice


def test_lesson_caption_and_notes_say_when_a_step_draws_the_presets():
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import UNTRAINED  # noqa: PLC0415

    caption = lesson.lesson_caption()
    assert lesson.SHUFFLE_STEPS == (2, 10)
    assert "Steps 2 and 10 compare the sentence with a shuffle of itself" in caption and "“The man bit the dog.”" in caption
    model = loaded_model(UNTRAINED)
    assert "The dog bit the man" not in lesson.STEPS[1].notice  # the notice reads the sentence drawn, whichever
    assert "sidebar sentence is empty" in lesson.stand_in_note(1, [], model)
    assert "fewer than three tokens, so this step sets" in lesson.stand_in_note(2, encode("Hi there"), model)
    assert "nothing to reorder" in lesson.stand_in_note(10, encode(" dog dog dog."), model)
    assert lesson.stand_in_note(2, encode("The cat sat on the mat."), model) == ""
    assert lesson.stand_in_note(3, encode("Hi there"), model) == "" and lesson.stand_in_note(4, [], model) == ""


def test_lesson_step_7_says_steep_alibi_heads_lean_towards_recent_tokens_not_only_neighbours():
    from lpos.lesson import STEPS  # noqa: PLC0415

    step = next(s for s in STEPS if s.about == "bias")
    assert "only at their neighbours" not in step.notice and "look only" not in step.notice
    assert "leans hardest towards recent tokens" in step.notice


def test_the_lesson_s_first_step_counts_one_token_in_the_singular():
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import UNTRAINED  # noqa: PLC0415

    model = loaded_model(UNTRAINED)
    assert lesson.token_rows(model, model, encode("Hi"))[1] == "1 token, so 1 row looked up."
    assert lesson.token_rows(model, model, encode("Hi there"))[1] == "2 tokens, so 2 rows looked up."


@shipped
def test_lesson_step_9_reads_the_curves_it_draws_whatever_the_sidebar_model():
    from conftest import app_test  # noqa: PLC0415
    from lpos.lesson import STEPS  # noqa: PLC0415

    assert "fall apart" not in STEPS[8].text + STEPS[8].notice
    for model in ("learned", "learned-32"):  # learned-32 trained on 32-token windows: left out of the curves
        at = app_test(page="pages/lesson.py", model=model, scheme="learned", step="9", timeout=300)
        assert not at.exception, at.exception
        text = " ".join(m.value for m in at.markdown)
        assert "The steepest curve, **rope-partial**, is **+1.56** nats at 1024 tokens" in text  # 4.531 - 2.974
        assert "still **1.48** nats better than the unigram baseline" in text  # 6.013 - 4.531
        assert "**learned-32** (trained on 32-token windows) is left out" in text
        drawn = {trace["name"].split(":")[0] for trace in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
        assert "learned-32" not in drawn and {"sinusoidal", "alibi", "learned"} <= drawn


@shipped
def test_lesson_caption_names_the_steps_that_do_not_draw_the_sentence():
    """The caption names the steps whose figure is not on the sidebar sentence (4, 5, 7, 8 and 9). Each step's
    view is run on two sentences: a step the caption counts as the sentence's must change, the others must not."""
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import LoadedModel, label, load_offered  # noqa: PLC0415

    def loaded(name):  # through the app's loader, which names the model in every cache key
        model, meta = load_offered(name)
        return LoadedModel(name, label(name), model, meta)

    sidebar = loaded("learned")
    one, two = encode("The dog bit the man and the dog ran."), encode("A cat sat on the mat by a cat!")
    same_end = encode("A cat sat on the mat by a cat.")  # ends like `one`

    def spec(step, ids):
        fig, _ = lesson.STEP_VIEWS[step - 1](sidebar, loaded(lesson.STEPS[step - 1].scheme or "learned"), ids)
        return fig if isinstance(fig, str) else fig.to_json()

    for step in range(1, len(lesson.STEPS) + 1):
        assert (spec(step, one) != spec(step, two)) == (step in lesson.SENTENCE_STEPS), step
        if step in lesson.SENTENCE_STEPS:
            assert (spec(step, one) == spec(step, same_end)) == (step in lesson.LAST_TOKEN_STEPS), step
    assert ("Steps 1, 2, 3, 6 and 10 draw the sidebar sentence (step 6 only its last token). Steps 4, 5, 7, 8 and 9 "
            "draw the shipped models") in lesson.lesson_caption()
