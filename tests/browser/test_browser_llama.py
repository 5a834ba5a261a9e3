"""A small Llama in a real browser: a Hugging Face LlamaForCausalLM (4 layers, 8 query heads, 2
key/value heads, RoPE base 500,000, GPT-2's vocabulary so no page needs a tokenizer) with random
weights, converted with `python -m lpos convert` into LPOS_CHECKPOINT_DIR, draws every page without
an exception; Stretching the context and Similarity use its own base and training length."""
from __future__ import annotations

import urllib.parse

import pytest
from conftest import model_box_text, open_url, start_app, walk_every_page

from lpos.cli import main
from lpos.tokenizer import VOCAB_SIZE

pytestmark = [pytest.mark.browser, pytest.mark.slow]
transformers = pytest.importorskip("transformers")

SENTENCE = "The dog bit the man and the dog ran"
BASE, TRAINED_ON = 500_000.0, 128
SCREENSHOTS = "/tmp/lpos_llama_{page}_{width}.png"
QUERY = urllib.parse.urlencode({"model": "dir:llama.pt", "scheme": "rope", "text": SENTENCE})


@pytest.fixture(scope="module")
def llama_app(tmp_path_factory):
    """The app with a converted small Llama in its shared folder."""
    import torch

    folder = tmp_path_factory.mktemp("llama")
    config = transformers.LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=160,
                                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                                      max_position_embeddings=TRAINED_ON, rope_theta=BASE, tie_word_embeddings=False)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder / "hf", safe_serialization=True)
    shared = folder / "shared"
    assert main(["convert", str(folder / "hf"), "--out", str(shared / "llama.pt")]) == 0
    app = start_app(folder, env={"LPOS_CHECKPOINT_DIR": str(shared)})
    yield app
    app.process.terminate()
    app.process.wait(timeout=20)


def test_every_page_draws_with_the_llama(llama_app, page):
    open_url(page, f"{llama_app.url}/?{QUERY}", timeout=300_000)
    assert "llama.pt (shared folder)" in model_box_text(page)
    texts = walk_every_page(page, "llama.pt (shared folder)")
    titles = list(texts)
    assert "RoPE adds no position rows: it rotates queries and keys by their position inside attention" in texts[titles[0]]  # nothing added to the input
    stretch = next(text for title, text in texts.items() if title.startswith("Stretching"))
    assert f"llama.pt (shared folder) was trained on {TRAINED_ON}-token windows (RoPE base {BASE:,g})" in stretch
    assert "Sections 1 to 3 rescale llama.pt (shared folder)" in stretch
    similarity = next(text for title, text in texts.items() if title.startswith("Similarity"))
    assert f"base {BASE:,g}, this model's" in similarity
    assert not [e for e in page.console_errors if "favicon" not in e], page.console_errors


@pytest.mark.parametrize("path", ["attention", "inside"])
def test_screenshots_of_attention_and_inside(llama_app, page, path):
    page.set_viewport_size({"width": 1400, "height": 3200})  # the whole page: Streamlit scrolls inside, not the body
    open_url(page, f"{llama_app.url}/{path}?{QUERY}", timeout=300_000)
    main_area = page.locator("[data-testid='stMain']")
    assert main_area.locator("[data-testid='stException']").count() == 0, main_area.inner_text()[:800]
    page.screenshot(path=SCREENSHOTS.format(page=path, width=1400), full_page=True)
