"""The Training timeline page in the real app, driven in headless Chromium: the step control moves by
keyboard (one arrow press: Streamlit's slider ignores Home and End), the figures redraw for that step,
and the browser reports no errors."""
from __future__ import annotations

import pytest

from conftest import CHARTS, open_url, run_and_wait
from lpos import checkpoints

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def chart_titles(page) -> list[str]:
    return page.locator(CHARTS).locator(".gtitle").evaluate_all("els => els.map(e => e.textContent)")


def test_step_slider_redraws_the_timeline(running_app, page, tmp_path):
    steps = checkpoints.load("learned")[1]["timeline"]["steps"]
    open_url(page, f"{running_app.url}/?scheme=learned&model=learned")
    run_and_wait(page, page.get_by_role("link", name="Training timeline").click)
    assert any(t.startswith(f"Validation loss, step {steps[-1]}:") for t in chart_titles(page)), chart_titles(page)
    slider = page.get_by_role("slider").first
    slider.focus()
    run_and_wait(page, lambda: slider.press("ArrowLeft"))  # one snapshot back; a fragment's run
    titles = chart_titles(page)
    assert any(t.startswith(f"Validation loss, step {steps[-2]}:") for t in titles), titles
    # the map's title is two lines (it fits a phone): Plotly's text is "Step N:" then the line after it
    assert any(t.startswith(f"Step {steps[-2]}:") and t.endswith("cosine of the learned position rows")
               for t in titles), titles
    page.screenshot(path=str(tmp_path / "timeline.png"), full_page=True)
    assert not page.console_errors, page.console_errors
    assert not page.failed_requests, page.failed_requests
