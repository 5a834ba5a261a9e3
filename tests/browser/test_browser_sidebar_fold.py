"""On a 1366×768 laptop the sidebar's upload box is a one-line folded box first among the controls (not
below the page list, the sentence, the scheme and the model): this opens the app at 1366×768 and checks
that it is on screen without scrolling and opens in place."""
from __future__ import annotations

import pytest
from conftest import new_page, open_url

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_upload_box_is_above_the_fold_on_a_1366x768_laptop(browser, running_app):
    page = new_page(browser, viewport={"width": 1366, "height": 768})
    context = page.context
    try:
        open_url(page, running_app.url)
        sidebar = page.locator("[data-testid='stSidebar']")
        box = sidebar.locator("[data-testid='stExpander']").filter(has_text="Upload your own model")
        shown = box.bounding_box()
        assert shown is not None and shown["y"] >= 0 and shown["y"] + shown["height"] <= 768, shown
        assert sidebar.evaluate("s => s.querySelector('[data-testid=\"stSidebarContent\"]').scrollTop") == 0
        box.locator("summary").click()
        chooser = sidebar.locator("[data-testid='stFileUploader'] button").first
        chooser.wait_for(state="visible")
        assert chooser.bounding_box()["y"] + chooser.bounding_box()["height"] <= 768  # opened in place, still on screen
    finally:
        context.close()
