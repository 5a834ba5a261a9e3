"""The Inside the model page in the real app, driven in headless Chromium: each tab draws when opened."""
from __future__ import annotations

import os

import pytest

from conftest import open_url, run_and_wait
from lpos.bench.browser import CHARTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]
FIRST_RUN = 300_000  # ms: the first visit probes ten models, slow on a busy two-core machine


def script_errors(page) -> list[str]:
    return [e for e in page.console_errors if not e.startswith("Failed to load resource")]


def test_inside_page_opens_each_part_in_its_tab(running_app, page, tmp_path):
    shots = os.environ.get("LPOS_SCREENSHOTS", str(tmp_path))
    page.set_viewport_size({"width": 1400, "height": 2400})  # the whole page in each screenshot
    open_url(page, f"{running_app.url}/?scheme=rope&model=untrained")
    run_and_wait(page, page.get_by_role("link", name="Inside the model").click, timeout=FIRST_RUN)
    charts = page.locator(CHARTS)
    assert charts.count() == 2  # the probes, one figure per panel (trained, untrained) so a phone stacks them
    assert page.get_by_text("Probe R², trained models").count() == 1 and page.get_by_text("Probe R², untrained models").count() == 1
    page.screenshot(path=f"{shots}/inside_probes.png", full_page=True)

    run_and_wait(page, page.get_by_role("tab", name="Head portraits").click, timeout=FIRST_RUN)
    assert page.get_by_text("What each head does: layer × head").count() == 1
    assert page.get_by_text("Layer 1, head 1: average attention by distance").count() == 1
    page.screenshot(path=f"{shots}/inside_heads.png", full_page=True)

    run_and_wait(page, page.get_by_role("tab", name="The sink, tested").click, timeout=FIRST_RUN)
    assert page.get_by_text("Streaming the text: rope · untrained (random init)").count() == 1
    assert page.get_by_text("What keeping the first 4 tokens saves, by scheme").count() == 0  # until asked
    run_and_wait(page, page.get_by_text("Every scheme: which one does the sink help?").click, timeout=FIRST_RUN)
    assert page.get_by_text("What keeping the first 4 tokens saves, by scheme").count() == 1
    page.screenshot(path=f"{shots}/inside_sink.png", full_page=True)
    assert not script_errors(page), page.console_errors
    assert not page.failed_requests, page.failed_requests
