"""One small model of each Hugging Face family (Qwen2, Qwen3, GPT-NeoX, SmolLM3, Gemma 3) in the app's shared folder,
as its own folder: in Chromium every page draws with it (a title, no exception, the model still chosen), and
Positions in attention says the family's practice (the share that turns, the layer without RoPE, the local and
global layers' windows and bases). Logits against transformers: tests/checkpoints/test_families.py."""
from __future__ import annotations

import urllib.parse

import pytest
from conftest import model_box_text, open_url, start_app, walk_every_page
from family_folders import PRACTICE, gpt2_vocabulary_folders

from lpos.pages import page_named

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "one two three four five six seven eight nine"


@pytest.fixture(scope="module")
def family_app(tmp_path_factory):
    shared = tmp_path_factory.mktemp("families")
    gpt2_vocabulary_folders(shared)
    with start_app(tmp_path_factory.mktemp("app"), env={"LPOS_CHECKPOINT_DIR": str(shared)}) as app:
        yield app


@pytest.mark.parametrize("name", list(PRACTICE))
def test_every_page_draws_each_family_and_says_its_practice(family_app, page, name):
    page.set_viewport_size({"width": 1400, "height": 1000})
    query = urllib.parse.urlencode({"model": f"dir:{name}", "text": SENTENCE})
    open_url(page, f"{family_app.url}/?{query}", timeout=300_000)
    assert name in model_box_text(page)
    texts = walk_every_page(page, name)
    assert PRACTICE[name] in texts[page_named("attention").title], name
    assert page.console_errors == []
