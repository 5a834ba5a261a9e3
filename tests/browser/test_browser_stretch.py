"""The Stretching-the-context page in headless Chromium: its figures draw, writing streams into the
page (text shows, and grows, before the writing is done), and Stop ends it mid-way, keeping what was
written."""
import re

import pytest

from conftest import open_url, run_and_wait, wait_for_app
from lpos import checkpoints

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not {"rope", "learned"} <= set(checkpoints.available()), reason="needs shipped models")]
IGNORED = ("favicon", "ERR_NAME_NOT_RESOLVED", "status of 500")  # page icons the offline sandbox cannot fetch
PROMPT = "Once upon a time"
# with the page drawn (wait_for_app): a written box, and no box with a cursor: writing is done
WRITTEN = """() => [...document.querySelectorAll('[data-testid="stMarkdownContainer"]')].some(e => e.innerText.startsWith('Once upon a time'))
  && ![...document.querySelectorAll('[data-testid="stMarkdownContainer"]')].some(e => e.innerText.endsWith('▌'))"""
# from before the click on, the longest text a box shows while its cursor is still there (the model still writing)
WATCH_BOXES = """() => { window.__lposWriting = '';
  new MutationObserver(() => {
    for (const e of document.querySelectorAll('[data-testid="stMarkdownContainer"]')) {
      const text = e.innerText;
      if (text.startsWith('Once upon a time') && text.endsWith('▌') && text.length > window.__lposWriting.length + 1)
        window.__lposWriting = text.slice(0, -1).trim();
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true}); }"""


def stretching(page, running_app) -> None:
    open_url(page, f"{running_app.url}/?scheme=rope&model=rope")
    run_and_wait(page, page.get_by_role("link", name="Stretching the context").first.click, timeout=300_000)


def test_the_page_draws_and_writing_streams_until_stopped(running_app, page, tmp_path):
    stretching(page, running_app)
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


def test_writing_shows_words_before_it_is_done(running_app, page):
    """Streaming: while the models still write (a cursor ends their boxes), their words are already on the
    page; at the end every box has its whole text and no cursor. Nothing here is timed."""
    stretching(page, running_app)
    page.evaluate(WATCH_BOXES)
    page.locator(".st-key-stretch_write button").click()
    wait_for_app(page, timeout=300_000, also=WRITTEN)
    streamed = page.evaluate("() => window.__lposWriting")
    assert len(streamed) > len(PROMPT), "no box showed written words before it was done"
    final = page.locator("[data-testid='stMarkdownContainer']").filter(has_text=PROMPT).all_inner_texts()
    assert 1 <= len(final) <= len(checkpoints.available())
    assert max(map(len, final)) >= len(streamed)  # the finished texts hold everything that was seen on the way
    assert not page.locator("[data-testid='stException']").count()
