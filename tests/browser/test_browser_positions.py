"""The Sinusoids, Similarity and RoPE & ALiBi pages in headless Chromium: the main figure renders,
no console errors, and the 1024 × 1024 similarity map arrives quickly and light."""
import time

import pytest

from conftest import open_url, run_and_wait
from lpos.pages import page_named

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = [  # (navigation title, query, a title the main figure must show)
    (page_named("sinusoids").title, "scheme=sinusoidal&model=untrained", "Sinusoidal table: 128 positions"),
    (page_named("similarity").title, "scheme=learned&model=untrained", ": learned rows"),
    (page_named("attention").title, "scheme=alibi&model=untrained", "How the bias tilts attention"),
    (page_named("attention").title, "scheme=rope&model=untrained", "q·k depends only on m − n"),
]
IGNORED = ("favicon", "ERR_NAME_NOT_RESOLVED", "status of 500")  # page icons the offline sandbox cannot fetch


def count_bytes(page) -> dict:
    """Bytes the page receives over Streamlit's websocket, in received["bytes"]."""
    received = {"bytes": 0}

    def on_socket(socket):
        socket.on("framereceived", lambda payload: received.__setitem__(
            "bytes", received["bytes"] + len(payload if isinstance(payload, bytes) else payload.encode())))
    page.on("websocket", on_socket)
    return received


def open_page(page, url: str, title: str, query: str) -> None:
    open_url(page, f"{url}/?{query}")
    run_and_wait(page, page.get_by_role("link", name=title).first.click)


def errors(page) -> list[str]:
    return [e for e in page.console_errors if not any(i in e for i in IGNORED)]


@pytest.mark.parametrize("title,query,figure_title", PAGES)
def test_page_renders_its_main_figure(running_app, page, title, query, figure_title):
    received = count_bytes(page)
    open_page(page, running_app.url, title, query)
    assert page.get_by_text(figure_title).count() >= 1
    assert not page.locator("[data-testid='stException']").count()
    assert not errors(page), errors(page)
    print(f"\n{title} ({query}): {received['bytes'] / 1e6:.2f} MB received")
    assert received["bytes"] < 4_000_000


def test_a_1024_by_1024_similarity_map_is_fast_and_light(running_app, page):
    received = count_bytes(page)
    open_url(page, f"{running_app.url}/similarity?scheme=sinusoidal&model=untrained&text=a+b&positions=1023")
    received["bytes"] = 0
    slider = page.get_by_role("slider").first
    assert slider.input_value() == "1023"  # the link's size (Streamlit 1.67's slider is an <input type="range">)
    slider.focus()
    start = time.perf_counter()
    run_and_wait(page, lambda: slider.press("ArrowRight"))  # one key, not a drag: one step to the maximum
    appeared = time.perf_counter() - start
    assert slider.input_value() == "1024"
    assert page.get_by_text("4×4 blocks averaged").count() >= 1
    print(f"\n1024 × 1024 similarity map: appeared after {appeared:.2f} s, page received "
          f"{received['bytes'] / 1e6:.2f} MB for the rerun")
    assert received["bytes"] < 2_000_000
    assert appeared < 15  # about a second on a desktop; the shared 2-core CI machine is slower
    assert not errors(page), errors(page)
