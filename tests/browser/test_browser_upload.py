"""The upload box in a real browser: a nanoGPT file made here goes in, its token rows come out on
the Embeddings page; the seed trainer's file at its real size is read (every page with it:
tests/checkpoints/test_upload.py); a bad file is refused with the model kept; another session never sees it; the server's
memory is given back when the session ends; HTML typed as a sentence stays text."""
from __future__ import annotations

import base64
import threading
import time
import urllib.parse

import numpy as np
import psutil
import pytest
import torch
from conftest import model_box_text, start_app, wait_for_app
from test_upload import hf_files, nanogpt_bytes, seed_bytes

from lpos.tokenizer import encode

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SENTENCE = "The dog bit the man and the dog ran"


def open_app(page, url: str, **query) -> None:
    page.goto(url + "/?" + urllib.parse.urlencode(query))
    wait_for_app(page)


def add_files(page, files: list[tuple[str, bytes]]) -> None:
    page.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data} for name, data in files])


def model_options(page) -> list[str]:
    page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").nth(1).click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return options


def first_token_rows(page) -> torch.Tensor:
    """The z values of the first panel (token rows) of the Embeddings page's heatmaps."""
    z = page.evaluate("""() => {
        const plots = [...document.querySelectorAll('.js-plotly-plot')];
        const heat = plots.find(p => p.data && p.data[0] && p.data[0].type === 'heatmap');
        return heat.data[0].z;
    }""")
    if isinstance(z, dict):  # Plotly sends arrays as {"dtype", "bdata" (base64), "shape"}
        shape = [int(n) for n in str(z["shape"]).split(",")]
        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return torch.tensor(np.asarray(z, dtype=np.float32))


def test_uploaded_nanogpt_file_drives_the_embeddings_page(running_app, page, browser):
    data, source = nanogpt_bytes(n_embd=64, n_layer=2, block_size=256)
    server_errors = []
    page.on("response", lambda r: r.status >= 500 and "favicon" not in r.url and server_errors.append(r.url))
    open_app(page, running_app.url, text=SENTENCE)
    add_files(page, [("ckpt.pt", data)])
    page.get_by_text("Loaded ckpt.pt").wait_for(timeout=90_000)
    wait_for_app(page)
    assert "ckpt.pt (your upload)" in model_box_text(page)
    assert "2 layers, 4 heads, width 64, 256 position rows" in page.locator("[data-testid='stSidebar']").inner_text()

    expected = source.transformer.wte.weight.detach()[encode(SENTENCE)]  # (T, 64) the upload's token rows
    torch.testing.assert_close(first_token_rows(page), expected, rtol=0, atol=1e-6)

    add_files(page, [("evil.pt", b"PK\x03\x04 not really a zip")])
    page.get_by_text("The model in use has not changed").wait_for(timeout=60_000)
    wait_for_app(page)
    assert "evil.pt is not a PyTorch checkpoint" in page.locator("[data-testid='stAlertContentError']").inner_text()
    assert "ckpt.pt (your upload)" in model_box_text(page)
    torch.testing.assert_close(first_token_rows(page), expected, rtol=0, atol=1e-6)
    assert not [e for e in page.console_errors if "Failed to load resource" not in e]  # (favicon.png: a 500)
    assert server_errors == [], server_errors

    other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()  # another user
    open_app(other, running_app.url, text=SENTENCE)
    options = model_options(other)
    assert options and not any("your upload" in option for option in options)
    other.context.close()


def test_seed_trainer_file_of_the_real_size_is_read_through_the_box(running_app, page, tmp_path):
    """The model learners build first: the Tiny Children Stories trainer's dict (blocks ln1/ln2, its
    own GPTConfig object) at its real size, 6 layers, 8 heads, width 512, block 1024 (45M
    parameters, 181 MB; its optimizer state left out here). The sidebar says how it was read, and the
    Embeddings page draws its token rows."""
    data, source = seed_bytes()
    (tmp_path / "best_model.pt").write_bytes(data)  # Playwright takes buffers up to 50 MB only
    del data
    open_app(page, running_app.url, text=SENTENCE)
    page.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(str(tmp_path / "best_model.pt"))
    page.get_by_text("Loaded best_model.pt").wait_for(timeout=300_000)
    wait_for_app(page, timeout=300_000)
    sidebar = page.locator("[data-testid='stSidebar']").inner_text()
    assert ("read as: trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); "
            "blocks named ln1/ln2") in sidebar
    assert (f"6 layers, 8 heads, width 512, 1,024 position rows, vocabulary 50,257, head tied to the token table, "
            f"{source.num_params() / 1e6:,.1f}M parameters") in sidebar
    expected = source.transformer.wte.weight.detach()[encode(SENTENCE)]
    torch.testing.assert_close(first_token_rows(page), expected, rtol=0, atol=1e-6)
    page.screenshot(path="/tmp/lpos_browser_seed_upload.png", full_page=True)
    assert not [e for e in page.console_errors if "favicon" not in e], page.console_errors


def test_hugging_face_pair_added_one_file_at_a_time(running_app, page):
    config, weights, source = hf_files()
    open_app(page, running_app.url, text=SENTENCE)
    add_files(page, [("config.json", config)])
    page.get_by_text("needs model.safetensors or pytorch_model.bin too").wait_for(timeout=60_000)
    add_files(page, [("model.safetensors", weights)])  # the box now holds both
    page.get_by_text("Loaded model.safetensors").wait_for(timeout=60_000)
    wait_for_app(page)
    assert "model.safetensors (your upload)" in model_box_text(page)
    expected = source.transformer.wte.weight.detach()[encode(SENTENCE)]
    torch.testing.assert_close(first_token_rows(page), expected, rtol=0, atol=1e-6)


def test_html_in_the_sentence_stays_text(running_app, page):
    text = '<img src=x onerror="window.__lpos_pwned=1"> <script>window.__lpos_pwned=2</script> **bold** $x$'
    open_app(page, running_app.url, text=text)
    assert page.evaluate("() => window.__lpos_pwned") is None
    assert page.locator("img[src='x']").count() == 0 and page.locator("[data-testid='stMain'] script").count() == 0
    box = page.locator("[data-testid='stSidebar'] textarea")
    page.wait_for_function("([box, text]) => box.value === text", arg=[box.element_handle(), text], timeout=15_000)
    chips = page.locator(".st-key-chips .lpos-chip-text").all_text_contents()
    assert "img" in chips and "␣<" in chips and "script" in chips  # shown as the characters they are
    assert page.locator(".st-key-chips [onerror], .st-key-chips img, .st-key-chips script").count() == 0
    page.screenshot(path="/tmp/lpos_browser_hostile_text.png", full_page=True)


def server_rss_mb(app) -> float:
    process = psutil.Process(app.process.pid)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20


class PeakRss:
    """Samples the server's RSS every 50 ms in a thread; `.peak` is the highest seen."""

    def __init__(self, app):
        self.app, self.peak, self.running = app, server_rss_mb(app), True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, server_rss_mb(self.app))
            time.sleep(0.05)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        return self.peak


def test_seed_size_upload_with_its_adam_state_keeps_only_the_model(browser, tmp_path):
    """The seed trainer's file as it saves it: 45M parameters (181 MB of float32 weights) and
    Adam's two moments for each (the file is about 540 MB). While it uploads, Streamlit holds the
    bytes; once read, only the model stays: the optimizer state is never read into memory (the
    file is memory-mapped and only the model's tensors are copied out) and Streamlit's copy of the
    bytes is dropped. Prints the figures docs/RELIABILITY.md gives."""
    from lpos.ui.upload import cap_mb

    data, model = seed_bytes(adam=True)
    (tmp_path / "best_model.pt").write_bytes(data)
    del data
    size_mb = (tmp_path / "best_model.pt").stat().st_size / 2**20
    model_mb = sum(p.numel() * 4 for p in model.parameters()) / 2**20
    assert 500 < size_mb < cap_mb(), size_mb
    app = start_app(tmp_path)
    try:
        uploader = browser.new_context().new_page()
        open_app(uploader, app.url, text=SENTENCE)
        before = server_rss_mb(app)
        peak = PeakRss(app)
        uploader.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(str(tmp_path / "best_model.pt"))
        uploader.get_by_text("Loaded best_model.pt").wait_for(timeout=600_000)
        wait_for_app(uploader, timeout=300_000)
        time.sleep(2)
        held = server_rss_mb(app)
        highest = peak.stop()
        print(f"file {size_mb:.0f} MB, model {model_mb:.0f} MB: server RSS {before:.0f} MB before, peak {highest:.0f} MB "
              f"(+{highest - before:.0f}) while uploading and loading, {held:.0f} MB (+{held - before:.0f}) after")
        assert "ignored: optimizer" in uploader.locator("[data-testid='stSidebar']").inner_text()
        assert held - before < model_mb + 0.5 * (size_mb - model_mb), (before, held)  # not the optimizer state, not the bytes
        uploader.context.close()
    finally:
        app.process.terminate()
        app.process.wait(timeout=20)


def test_an_upload_is_freed_when_its_session_ends(browser, tmp_path):
    """Streamlit keeps a closed tab's session for server.disconnectedSessionTTL (120 s by default;
    2 s here) so that a reconnect can resume it, and drops it when another session leaves. The
    next full collection (lpos/ui/collect.py: at the start of a run, at most every
    LPOS_FULL_GC_SECONDS, 2 s here) frees it: the upload's bytes and model leave the server's memory."""
    data, _ = nanogpt_bytes(n_embd=512, n_layer=1, n_head=8, block_size=64)  # about 110 MB
    (tmp_path / "big.pt").write_bytes(data)  # Playwright takes buffers up to 50 MB only
    app = start_app(tmp_path, env={"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": "2", "LPOS_FULL_GC_SECONDS": "2"})
    try:
        uploader = browser.new_context().new_page()  # the server's first session: nothing special about it
        open_app(uploader, app.url, text=SENTENCE)
        before = server_rss_mb(app)
        uploader.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(str(tmp_path / "big.pt"))
        uploader.get_by_text("Loaded big.pt").wait_for(timeout=90_000)
        wait_for_app(uploader)
        grown = server_rss_mb(app) - before
        assert grown > 0.8 * len(data) / 2**20  # the model (Streamlit's copy of the bytes is dropped once read)
        uploader.context.close()
        deadline = time.time() + 60
        while server_rss_mb(app) - before > 0.3 * grown and time.time() < deadline:
            time.sleep(3)
            visitor = browser.new_context().new_page()  # later sessions come and go, as on a live server
            open_app(visitor, app.url, text=SENTENCE)
            visitor.context.close()
        after = server_rss_mb(app)
        print(f"server RSS: {before:.0f} MB, {before + grown:.0f} MB with the upload, {after:.0f} MB after")
        assert after - before < 0.3 * grown, (before, grown, after)
    finally:
        app.process.terminate()
        app.process.wait(timeout=20)
