"""Every chart's camera button, clicked in headless Chromium, downloads an SVG named after what it
shows (lpos.ui.export.chart): distinct names on a page, and a heatmap's raster part embedded in the
file, so a slide tool's importer gets the whole figure."""
from __future__ import annotations

import re

import pytest

from conftest import CHARTS, open_url, run_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.slow]
FIRST_RUN = 300_000  # ms: a cold server's first page on a busy two-core machine
FILE_NAME = re.compile(r"lpos-[a-z0-9-]+\.svg")


def downloads(page) -> dict[str, str]:
    """Each chart's camera button clicked in turn: {file name: its text}."""
    found = {}
    charts = page.locator(CHARTS)
    for index in range(charts.count()):
        chart = charts.nth(index)
        chart.scroll_into_view_if_needed()
        chart.hover()  # Plotly shows its modebar on hover
        button = chart.locator(".modebar-btn[data-title^='Download plot']")
        assert button.count() == 1, f"chart {index} has no download button"
        with page.expect_download(timeout=60_000) as caught:
            button.click()
        download = caught.value
        name = download.suggested_filename
        assert name not in found, f"two charts on {page.url} download as {name}"
        with open(download.path(), encoding="utf-8") as file:
            found[name] = file.read()
    return found


def test_the_camera_button_downloads_named_svg_files(running_app, page):
    page.set_viewport_size({"width": 1400, "height": 2400})
    open_url(page, f"{running_app.url}/?scheme=learned&model=learned", timeout=FIRST_RUN)
    files = downloads(page)
    assert len(files) >= 2, files.keys()
    for name, text in files.items():
        assert FILE_NAME.fullmatch(name), name
        assert name.startswith("lpos-embeddings-") and "learned" in name, name
        assert text.lstrip().startswith("<svg") and text.rstrip().endswith("</svg>"), name[:60]

    run_and_wait(page, page.get_by_role("link", name="Similarity and neighbours").click, timeout=FIRST_RUN)
    files = downloads(page)
    maps = [text for name, text in files.items() if name.startswith("lpos-similarity-") and "map" in name]
    assert maps, files.keys()
    for text in maps:  # a heatmap is drawn as an image inside the SVG: it must travel with the file
        assert "<image" in text and "data:image/png;base64," in text
