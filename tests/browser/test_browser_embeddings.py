"""The Embeddings page in headless Chromium: type a sentence, switch scheme, share the link."""
import re
import urllib.parse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from conftest import CHARTS, new_page, open_url, run_and_wait

from lpos import checkpoints

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dog saw the cat and the man"
CHIPS = ".st-key-chips"  # the keyed container the token chips' HTML is drawn in


def heatmaps_title(page) -> str:
    """The three tables' title line, over three charts (side by side; a phone stacks them)."""
    assert page.locator(CHARTS).count() == 3  # token, position, summed rows; the token chips are HTML
    return page.get_by_text(re.compile(r"^Token rows \+ position rows = summed rows")).text_content()


def url_state(url: str) -> dict:
    return {key: values[0] for key, values in urllib.parse.parse_qs(urllib.parse.urlparse(url).query).items()}


def click_for_download(page, button):
    """The file a click on a download button gives. In 1 of 7 full CI runs the first click on
    the freshly opened expander's button gave no download within 90 s (not seen when run alone, nor
    with the cores kept busy); a second click is what a person would do, so the test does it too."""
    for timeout in (30_000, 90_000):
        try:
            with page.expect_download(timeout=timeout) as download:
                button.click()
            return download.value
        except PlaywrightTimeout:
            if timeout == 90_000:
                raise


def test_type_switch_scheme_and_share_the_link(running_app, page, browser, tmp_path):
    failed_requests = []  # names the request behind a "Failed to load resource" console error
    page.on("response", lambda response: response.status >= 400 and failed_requests.append(
        f"{response.status} {urllib.parse.urlparse(response.url).path}"))
    page.set_default_timeout(90_000)  # the machine may be busy; Streamlit reruns can take a while
    open_url(page, running_app.url)
    assert "learned, 5 tokens" in heatmaps_title(page)

    sentence = page.locator("[data-testid='stSidebar'] textarea")
    sentence.fill(SENTENCE)
    run_and_wait(page, lambda: sentence.press("Control+Enter"))
    assert "learned, 8 tokens" in heatmaps_title(page)

    page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first.click()
    run_and_wait(page, page.get_by_role("option", name=re.compile(r"^sinusoidal")).click)
    assert "sinusoidal, 8 tokens" in heatmaps_title(page)

    heatmaps = page.locator(CHARTS)
    chip_texts = page.locator(f"{CHIPS} .lpos-chip-text").all_text_contents()
    assert len(chip_texts) == 8 and sum(t.startswith("␣the") for t in chip_texts) == 2
    assert heatmaps.locator("g.hm image").count() == 3  # token, position and summed rows
    assert [heatmaps.nth(i).locator(".gtitle").text_content() for i in range(3)] == \
        ["token rows", "+ position rows", "= summed rows (input to block 1)"]
    assert page.get_by_text("at positions 3 and 6").count() == 1

    model = "sinusoidal" if "sinusoidal" in checkpoints.available() else "untrained"
    assert url_state(page.url) == {"text": SENTENCE, "scheme": "sinusoidal", "model": model}

    box = heatmaps.locator(".nsewdrag").first.bounding_box()
    hover = page.locator(".hoverlayer .hovertext").first
    for nudge in range(3):  # a hover needs a mouse *move* over a drawn cell
        page.mouse.move(box["x"] + box["width"] / 2 + nudge * 3, box["y"] + box["height"] / 2)
    hover.wait_for(timeout=10_000)  # Plotly draws the label on the mouse event, not on a server run
    assert re.search(r"token rows.*dimension \d+.*value -?\d\.\d{4}", hover.text_content())

    page.get_by_text("The raw numbers").click()
    download = click_for_download(page, page.get_by_role("button", name="Download all numbers (CSV)"))
    header = open(download.path(), encoding="utf-8").readline()
    assert header.startswith("position,token,id,part,d0,d1")
    page.screenshot(path=str(tmp_path / "embeddings.png"), full_page=True)

    shared = new_page(browser)
    shared.set_default_timeout(90_000)
    shared_errors = []
    shared.on("console", lambda message: message.type == "error" and shared_errors.append(message.text))
    open_url(shared, page.url)
    assert "sinusoidal, 8 tokens" in heatmaps_title(shared)
    assert shared.locator("[data-testid='stSidebar'] textarea").input_value() == SENTENCE  # at the first draw
    # Streamlit 1.67's selectbox is a combobox: the chosen option is its input's value
    assert "sinusoidal" in shared.locator("[data-testid='stSidebar'] [data-testid='stSelectbox'] input").first.input_value()
    shared.screenshot(path=str(tmp_path / "embeddings_shared.png"), full_page=True)
    shared.context.close()

    assert failed_requests == []
    assert page.console_errors == [] and shared_errors == []
