"""The Lesson page: every step draws its figure for any sentence and scheme; the URL follows."""
import pytest

from conftest import SCHEMES, app_test
from lpos.lesson import STEPS

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
