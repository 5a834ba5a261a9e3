"""The Lab page in Chromium: a run shows its progress before it ends, then the sidebar offers its model and other
pages draw it; two sessions starting at once both finish, the second shown its place in the queue first."""
from __future__ import annotations

import pytest

from conftest import model_box_text, new_page, open_url, run_and_wait, wait_for_app
from lpos.pages import page_named

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RESULTS = "How far each run reads"
TRAINING_TIMEOUT = 600_000  # ms: a worker process starts (imports torch), trains and evaluates on a busy machine


def start_run(page, url: str, *, steps: int) -> None:
    open_url(page, f"{url}/lab")
    steps_box = page.get_by_label("Steps")
    steps_box.fill(str(steps))
    steps_box.press("Enter")
    wait_for_app(page)
    run_and_wait(page, page.get_by_role("button", name="Start training").click)


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator('[data-testid="stException"]').first.inner_text()


def test_a_run_shows_progress_then_every_page_draws_its_model(running_app, page):
    start_run(page, running_app.url, steps=400)
    page.get_by_text("Step ", exact=False).filter(has_text=" of 400").first.wait_for(timeout=TRAINING_TIMEOUT)
    shown = page.get_by_text(" of 400", exact=False).first.inner_text()
    assert not shown.startswith("Step 400 of"), shown  # progress seen before the run's end
    assert page.locator('[data-testid="stProgress"]').count() >= 1
    page.get_by_text(RESULTS).wait_for(timeout=TRAINING_TIMEOUT)
    no_exception(page)
    page.get_by_text("learned · 32 on Copy: use it or download it").click()
    run_and_wait(page, page.get_by_role("button", name="Show it on every page").click)
    assert "lab-learned-copy-32.pt" in model_box_text(page)
    for title in (page_named(name).title for name in ("embeddings", "similarity", "lengths")):
        run_and_wait(page, page.get_by_role("link", name=title).first.click)
        no_exception(page)
        assert "lab-learned-copy-32.pt" in model_box_text(page)
    assert page.console_errors == []


def test_two_sessions_at_once_both_finish_the_second_told_its_place(running_app, browser):
    first, second = new_page(browser), new_page(browser)
    start_run(first, running_app.url, steps=300)
    start_run(second, running_app.url, steps=300)
    second.get_by_text("place 1 in the queue", exact=False).wait_for(timeout=60_000)
    for page in (first, second):
        page.get_by_text(RESULTS).wait_for(timeout=TRAINING_TIMEOUT)
        no_exception(page)
    for page in (first, second):
        page.context.close()
