"""The Lesson in a real browser: Next through every step, the URL follows, presenter screenshots."""
import re

import pytest

from conftest import wait_for_app
from lpos.lesson import STEPS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_next_walks_every_step_and_presenter_screenshots(running_app, page, tmp_path):
    page.goto(f"{running_app.url}/lesson?text=The+dog+saw+the+cat+and+the+man&scheme=learned&model=learned")
    wait_for_app(page)
    for step in range(1, len(STEPS) + 1):
        page.wait_for_selector(f"h2:has-text('{step}. {STEPS[step - 1].title}')", timeout=60_000)
        page.wait_for_selector(".js-plotly-plot", timeout=60_000)
        assert re.search(rf"[?&]step={step}(&|$)", page.url), page.url
        if step < len(STEPS):
            page.get_by_role("button", name="Next").click()
            wait_for_app(page)
    for step in (1, 4, 10):
        page.goto(f"{running_app.url}/lesson?text=The+dog+bit+the+man&scheme=none&model=none&step={step}&presenter=1")
        wait_for_app(page)
        page.wait_for_selector(".js-plotly-plot", timeout=60_000)
        assert not page.locator("[data-testid='stSidebar']").is_visible()
        page.screenshot(path=str(tmp_path / f"lesson_step{step}_presenter.png"), full_page=True)
        assert (tmp_path / f"lesson_step{step}_presenter.png").stat().st_size > 10_000
    assert not page.console_errors, page.console_errors
    assert not page.failed_requests, page.failed_requests
