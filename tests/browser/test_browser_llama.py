"""A small Llama in a real browser: a Hugging Face LlamaForCausalLM (4 layers, 8 query heads, 2
key/value heads, RoPE base 500,000, GPT-2's vocabulary so no page needs a tokenizer) with random
weights, converted with `python -m lpos convert` into LPOS_CHECKPOINT_DIR, draws Positions in
attention and Inside the model, screenshots taken. Every page with a Llama: tests/model/test_llama.py."""
from __future__ import annotations

import urllib.parse

import pytest
from conftest import open_url, start_app

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


@pytest.mark.parametrize("path", ["attention", "inside"])
def test_screenshots_of_attention_and_inside(llama_app, page, path):
    page.set_viewport_size({"width": 1400, "height": 3200})  # the whole page: Streamlit scrolls inside, not the body
    open_url(page, f"{llama_app.url}/{path}?{QUERY}", timeout=300_000)
    main_area = page.locator("[data-testid='stMain']")
    assert main_area.locator("[data-testid='stException']").count() == 0, main_area.inner_text()[:800]
    page.screenshot(path=SCREENSHOTS.format(page=path, width=1400), full_page=True)
