"""Shared links opened fresh: the sentence box holds the link's text at the first draw, no waiting; a page's
old path still opens it.

The box was seen empty on a link's first load while the page drew the link's sentence (2 of 5 CI
runs, 1 of 177 load-test actions): the URL's text was written into the widget's key before the
widget existed. lpos.ui.state passes it as the box's initial value.
"""
import urllib.parse

import pytest

from conftest import SCHEMES, new_page, open_url, wait_for_app
from lpos.pages import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PATHS = [page.url_path for page in PAGES]  # old paths: test_a_page_by_an_old_path_or_its_name
TEXTS = ["The dog bit the man", "Once upon a time 🐉 a dragon", "a", "Line one\nline two, and the end",
         "The cat sat on the mat near the old red house"]


def link_text(index: int) -> str:
    return f"{TEXTS[index % len(TEXTS)]} {index}"


def test_a_fresh_link_to_every_path_shows_its_sentence_at_the_first_draw(running_app, browser):
    wrong = []
    for index, path in enumerate(PATHS):
        text, scheme = link_text(index), SCHEMES[index % len(SCHEMES)]
        query = urllib.parse.urlencode({"text": text, "scheme": scheme, "model": "untrained"})
        page = new_page(browser)
        try:
            open_url(page, f"{running_app.url}/{path}?{query}")
            box = page.locator("[data-testid='stSidebar'] textarea").first.evaluate("box => box.value")
            shown = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query))
            if box != text or shown.get("text") != text or shown.get("scheme") != scheme:
                wrong.append((index, path, box, shown))
        finally:
            page.context.close()
    assert wrong == []


REDIRECTS = [(path, declared) for declared in PAGES
             for path in ((declared.name,) if declared.default else ()) + declared.old_paths]


@pytest.mark.parametrize("path, target", REDIRECTS, ids=[path for path, _ in REDIRECTS])
def test_a_page_by_an_old_path_or_its_name(running_app, page, path, target):
    """A path a page was served at before, or the default page's name (typed, or a link to it), opens that
    page with the link's sentence, not "Page not found"."""
    open_url(page, f"{running_app.url}/{path}?text=A+cat+sat")
    page.wait_for_function("path => location.pathname === path", arg=f"/{target.url_path}", timeout=30_000)
    wait_for_app(page)
    assert page.get_by_text("Page not found").count() == 0
    assert page.locator("[data-testid='stSidebar'] textarea").input_value() == "A cat sat"
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query)).get("text") == "A cat sat"
