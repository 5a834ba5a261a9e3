"""The three shipped models of today's RoPE practice (partial RoPE, p-RoPE, RoPE with a NoPE layer) on every page in
headless Chromium: each page draws with the model chosen at 1400 px and the views that show what each rotates say
it; every page opens at 400 px with no exception."""
from __future__ import annotations

import pytest

from conftest import model_box_text, open_url, walk_every_page
from lpos.pages import PAGES, page_named

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAID = {  # the sentence Positions in attention writes from each model's rotation
    "rope-partial": "Only the first 8 of each head's 32 columns turn",
    "p-rope": "12 of each head's 16 pairs turn, the fastest",
    "rnope": "Layer 4 rotates nothing",
}


@pytest.mark.parametrize("name", list(SAID))
def test_every_page_draws_the_model(running_app, page, name):
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_url(page, f"{running_app.url}/?model={name}&text=The+dog+saw+the+cat.", timeout=300_000)
    assert name in model_box_text(page)
    texts = walk_every_page(page, name)
    assert SAID[name] in texts[page_named("attention").title]


def test_every_page_opens_on_a_phone_with_a_model_that_turns_part_of_each_head(running_app, page, tmp_path):
    """At 400 px, each page by its own link (one model: the narrow layout is the same code for all three)."""
    name = "rope-partial"
    page.set_viewport_size({"width": 400, "height": 900})
    for entry in PAGES:
        open_url(page, f"{running_app.url}/{entry.url_path}?model={name}&text=The+dog+saw+the+cat.", timeout=300_000)
        main = page.locator("[data-testid='stMain']")
        assert main.locator("h1").count() >= 1, entry.name
        assert main.locator("[data-testid='stException']").count() == 0, (entry.name, main.inner_text()[:800])
        assert name in model_box_text(page), entry.name
        if entry.name in ("attention", "stretch"):
            page.screenshot(path=str(tmp_path / f"{name}-{entry.name}-400.png"), full_page=True)
