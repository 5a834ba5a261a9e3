"""The Stretching-the-context page in headless Chromium: its figures draw, writing streams into the
page, and Stop ends it mid-way, keeping what was written."""
import re

import pytest

from conftest import open_url, run_and_wait
from lpos import checkpoints

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not {"rope", "learned"} <= set(checkpoints.available()), reason="needs shipped models")]
IGNORED = ("favicon", "ERR_NAME_NOT_RESOLVED", "status of 500")  # page icons the offline sandbox cannot fetch


def test_the_page_draws_and_writing_streams_until_stopped(running_app, page, tmp_path):
    open_url(page, f"{running_app.url}/?scheme=rope&model=rope")
    run_and_wait(page, page.get_by_role("link", name="Stretching the context").first.click, timeout=300_000)
    assert page.get_by_text("Which pairs turn fully inside the 128-token window").count() == 1
    assert page.get_by_text(re.compile(r"The built-in story: [\d,]+ predictions at every length")).count() == 1
    assert not page.locator("[data-testid='stException']").count()

    page.locator(".st-key-stretch_write button").click()
    # a box shows the growing text with its cursor while the loop runs: the page stays live
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]')]"
                           ".some(e => e.innerText.startsWith('Once upon a time') && e.innerText.endsWith('▌'))",
                           timeout=120_000)
    run_and_wait(page, page.locator(".st-key-stretch_stop button").click, timeout=120_000)
    assert page.get_by_text("Stopped: the texts end where writing stopped.").count() == 1
    texts = page.locator("[data-testid='stMarkdownContainer']").filter(has_text="Once upon a time").all_inner_texts()
    assert 1 <= len(texts) <= len(checkpoints.available())
    page.screenshot(path=str(tmp_path / "stretch.png"), full_page=True)
    errors = [e for e in page.console_errors if not any(i in e for i in IGNORED)]
    assert not errors, errors
