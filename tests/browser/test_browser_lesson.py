"""The Lesson in a real browser: Next through every step, the URL follows, presenter screenshots."""
import re

import pytest

from conftest import open_url, run_and_wait
from lpos.lesson import STEPS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_next_walks_every_step_and_presenter_screenshots(running_app, page, tmp_path):
    open_url(page, f"{running_app.url}/lesson?text=The+dog+saw+the+cat+and+the+man&scheme=learned&model=learned")
    for step in range(1, len(STEPS) + 1):
        assert page.locator("h2").filter(has_text=f"{step}. {STEPS[step - 1].title}").count() == 1
        assert page.locator(".js-plotly-plot" if step > 1 else ".st-key-lesson_figure_1 .lpos-chip").count() == \
            (1 if step > 1 else 8)  # step 1 draws the sentence's token chips (HTML), the others one figure
        assert re.search(rf"[?&]step={step}(&|$)", page.url), page.url
        if step < len(STEPS):
            run_and_wait(page, page.get_by_role("button", name="Next").click)  # the step's fragment reruns
    for step in (1, 4, 10):
        open_url(page, f"{running_app.url}/lesson?text=The+dog+bit+the+man&scheme=none&model=none&step={step}&presenter=1")
        assert page.locator(".js-plotly-plot" if step > 1 else ".lpos-chip").count() == (1 if step > 1 else 5)
        assert not page.locator("[data-testid='stSidebar']").is_visible()
        page.screenshot(path=str(tmp_path / f"lesson_step{step}_presenter.png"), full_page=True)
        assert (tmp_path / f"lesson_step{step}_presenter.png").stat().st_size > 10_000
    assert not page.console_errors, page.console_errors
    assert not page.failed_requests, page.failed_requests
