"""The Lesson page: every step draws its figure for any sentence and scheme; the URL follows."""
import pytest

from conftest import SCHEMES, app_test
from lpos.lesson import STEPS

SENTENCES = ["The dog bit the man", "🦄 <script>alert(1)</script> the the banana"]


def walk(at) -> list[int]:
    """Click Next through every step; returns how many figures each step drew."""
    drawn = []
    for step in range(1, len(STEPS) + 1):
        assert not at.exception, f"step {step}: {at.exception[0].message}"
        assert at.query_params["step"] == [str(step)]
        assert at.header[0].value == f"{step}. {STEPS[step - 1].title}"
        drawn.append(len(at.get("plotly_chart")))
        if step < len(STEPS):
            at.button(key="lesson_next").click().run()
    return drawn


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("text", SENTENCES)
def test_every_step_draws_its_figure(scheme, text):
    at = app_test(page="pages/lesson.py", text=text, scheme=scheme, model=scheme)
    assert walk(at) == [1] * len(STEPS)
    assert not at.warning, [w.value for w in at.warning]


def test_untrained_model_and_empty_text_still_teach():
    at = app_test(page="pages/lesson.py", text="", model="untrained")
    assert walk(at) == [1] * len(STEPS)


def test_step_comes_from_the_url_and_previous_goes_back():
    at = app_test(page="pages/lesson.py", step="4")
    assert at.header[0].value.startswith("4. ")
    assert "129" in at.markdown[-1].value or any("129" in m.value for m in at.markdown)  # the wall's error
    at.button(key="lesson_previous").click().run()
    assert at.query_params["step"] == ["3"]


def test_a_bad_step_in_the_url_is_refused_with_a_notice():
    at = app_test(page="pages/lesson.py", step="../../99")
    assert at.header[0].value.startswith("1. ")
    assert "no step" in at.warning[0].value


def test_presenter_mode_is_in_the_url_and_can_be_left():
    at = app_test(page="pages/lesson.py", step="10", presenter="1")
    assert at.query_params["presenter"] == ["1"]
    assert not at.title  # the page title is hidden; the step header remains
    at.button(key="leave_presenter").click().run()
    assert "presenter" not in at.query_params
    assert at.title
