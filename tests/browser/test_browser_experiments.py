"""The two experiment pages in the real app, driven in headless Chromium."""
from __future__ import annotations

import pytest

from conftest import open_url, run_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_page(page, running_app, title: str) -> None:
    """Open the app at its root, then the page by its link in the navigation, as a learner would."""
    open_url(page, f"{running_app.url}/?scheme=none&model=untrained")
    run_and_wait(page, page.get_by_role("link", name=title).click)


def script_errors(page) -> list[str]:
    """Console errors but the browser's own resource-load reports: offline, the app's icon font
    and favicon cannot be fetched, which says nothing about these pages."""
    return [e for e in page.console_errors if not e.startswith("Failed to load resource")]


def test_shuffle_button_updates_the_table_without_console_errors(running_app, page, tmp_path):
    open_page(page, running_app, "Order blindness (shuffle)")
    table = page.locator("[data-testid='stTable']").first
    sentences = page.locator("[data-testid='stCode']").first
    before_table, before_sentences = table.inner_text(), sentences.inner_text()
    swapped = "shuffled: The │ ␣man │ ␣bit │ ␣the │ ␣dog │ ."  # the preset swap, token by token
    assert swapped in before_sentences
    run_and_wait(page, page.get_by_role("button", name="Shuffle earlier tokens").click)  # a fragment's run
    after_table = table.inner_text()
    assert after_table != before_table
    rows = [row.locator("th, td").all_inner_texts() for row in table.locator("tbody tr").all()]
    none_row = next(row for row in rows if row[0].startswith("none"))
    assert none_row[3] == "yes"  # none stays order-blind
    assert swapped not in sentences.inner_text()
    page.screenshot(path=str(tmp_path / "order_blindness.png"), full_page=True)
    assert not script_errors(page), page.console_errors


def test_extrapolation_page_draws_its_figures(running_app, page, tmp_path):
    open_page(page, running_app, "Length extrapolation")
    assert page.locator(".js-plotly-plot").count() >= 2
    assert page.get_by_text("Mean loss over the first 128 predictions").count() == 1
    page.screenshot(path=str(tmp_path / "extrapolation.png"), full_page=True)
    assert not script_errors(page), page.console_errors
