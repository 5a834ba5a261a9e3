"""A character-level model in a real browser: Karpathy's "Let's build GPT" lecture layout with random
weights and its vocabulary text, converted with `python -m lpos convert` into LPOS_CHECKPOINT_DIR,
draws its own tokens as chips (characters, spaces and newlines made visible); and the same
model uploaded through the sidebar together with its training text is read with that tokenizer."""
from __future__ import annotations

import urllib.parse

import pytest
from conftest import model_box_text, open_url, start_app, wait_for_app
from test_browser_upload import add_files
from test_courses import CHARS, TEXT, V, converted_character_model, lecture_weights


pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "Speak, hear me!\nAll: speak"  # every character is in the lecture's vocabulary
SCREENSHOTS = "/tmp/lpos_own_vocab_{page}_{width}.png"


@pytest.fixture(scope="module")
def char_app(tmp_path_factory):
    """The app with the lecture's character model converted into its shared folder."""
    folder = tmp_path_factory.mktemp("own_vocab")
    shared = converted_character_model(folder)
    app = start_app(folder, env={"LPOS_CHECKPOINT_DIR": str(shared)})
    yield app
    app.process.terminate()
    app.process.wait(timeout=20)


def chips(page) -> list[str]:
    """The Embeddings page's chip texts (st.html draws its HTML once the run's elements are in)."""
    page.locator(".st-key-chips .lpos-chip-text").first.wait_for(timeout=30_000)
    return page.locator(".st-key-chips .lpos-chip-text").all_text_contents()


def test_the_character_model_s_chips_show_each_character(char_app, page):
    """Every page with this model: tests/checkpoints/test_courses.py."""
    query = urllib.parse.urlencode({"model": "dir:chars.pt", "scheme": "learned", "text": SENTENCE})
    open_url(page, f"{char_app.url}/?{query}")
    assert "chars.pt (shared folder)" in model_box_text(page), page.locator("[data-testid='stMain']").inner_text()[:800]
    # one chip per character, spaces and the newline made visible
    assert chips(page) == [{" ": "␣", "\n": "↵"}.get(c, c) for c in SENTENCE]
    assert not [e for e in page.console_errors if "favicon" not in e], page.console_errors


@pytest.mark.parametrize("width", [1400, 400])
@pytest.mark.parametrize("path", ["", "similarity"])
def test_screenshots_of_embeddings_and_similarity(char_app, page, path, width):
    page.set_viewport_size({"width": width, "height": 1000})
    query = urllib.parse.urlencode({"model": "dir:chars.pt", "scheme": "learned", "text": SENTENCE})
    open_url(page, f"{char_app.url}/{path}?{query}")
    main_area = page.locator("[data-testid='stMain']")
    assert main_area.locator("[data-testid='stException']").count() == 0, main_area.inner_text()[:800]
    if not path:
        assert "↵" in chips(page) and "␣" in chips(page)
    page.screenshot(path=SCREENSHOTS.format(page=path or "embeddings", width=width), full_page=True)


def test_upload_a_character_model_with_its_training_text(char_app, page, tmp_path):
    import torch

    torch.save(lecture_weights(vocab=V), tmp_path / "lecture.pt")
    open_url(page, f"{char_app.url}/?{urllib.parse.urlencode({'text': SENTENCE})}")
    add_files(page, [("lecture.pt", (tmp_path / "lecture.pt").read_bytes()), ("input.txt", TEXT.encode())])
    page.get_by_text("Loaded lecture.pt").wait_for(timeout=90_000)
    wait_for_app(page)
    assert "lecture.pt (your upload)" in model_box_text(page)
    sidebar = page.locator("[data-testid='stSidebar']").inner_text()
    assert f"characters of input.txt ({V}), {V} tokens" in sidebar
    assert chips(page) == [{" ": "␣", "\n": "↵"}.get(c, c) for c in SENTENCE]
    assert len(CHARS) == V
    main_area = page.locator("[data-testid='stMain']")
    assert main_area.locator("[data-testid='stException']").count() == 0, main_area.inner_text()[:800]
    assert not [e for e in page.console_errors if "favicon" not in e], page.console_errors
