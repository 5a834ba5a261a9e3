"""A deep grouped-query model on the pages whose work grows with layers and heads.

A tiny random Llama of SmolLM2-135M's depth and head layout (30 layers, 9 query heads, 3 key/value
heads; width 36 to stay fast) with its own character vocabulary, in a shared folder: Inside the
model, RoPE & ALiBi and Order blindness open with it, offer its 30 layers (numbered from 1) and
all 9 heads (each naming the key head it shares), and layer 30 draws layer 30's own numbers,
checked against the model's own `trace`.
"""
from __future__ import annotations

import base64
import json
import string

import numpy as np
import pytest
import streamlit as st
import torch

from conftest import app_test
from lpos import checkpoints, corpus
from lpos.analysis.probes import probe_text
from lpos.model import GPT, GPTConfig
from lpos.positions import SCHEMES
from lpos.tokenizer import CharacterTokenizer

LAYERS, HEADS, KV_HEADS = 30, 9, 3
SENTENCE = "The dog bit the man."
SLOW = 600  # seconds: a first run on a busy machine


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """(model, tokenizer): a 30-layer Llama-shaped rope model saved as deep.pt in a shared folder."""
    folder = tmp_path_factory.mktemp("shared")
    tokenizer = CharacterTokenizer(sorted(set(string.printable)), source="test")
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=128, n_layer=LAYERS, n_head=HEADS,
                       n_kv_head=KV_HEADS, n_embd=36, position="rope", norm="rmsnorm", mlp="swiglu",
                       mlp_hidden=48, bias=False, tied=False)
    model = GPT(config).eval()
    with torch.no_grad():  # weights large enough that heads differ from an even spread
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(0.4 * torch.randn_like(p))
    checkpoints.save(model, {"steps": 100, "tokenizer": tokenizer}, folder / "deep.pt")
    loaded, meta = checkpoints.load(folder / "deep.pt")
    patch = pytest.MonkeyPatch()
    patch.setenv("LPOS_CHECKPOINT_DIR", str(folder))
    patch.setenv("LPOS_VIEW_CACHE", str(folder / "cache"))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield loaded.eval(), meta["tokenizer"]
    patch.undo()
    st.cache_data.clear()
    st.cache_resource.clear()


def charts(at) -> dict[str, dict]:
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def values(data) -> np.ndarray:
    """A Plotly array from a chart's JSON: a list, or {"dtype", "bdata", "shape"} (base64 of the values)."""
    if isinstance(data, dict):
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
        return flat.reshape([int(n) for n in str(data["shape"]).split(",")]) if "shape" in data else flat
    return np.asarray(data, dtype=float)


def test_inside_portrays_one_chosen_layer_of_a_deep_model(deep):
    model, tokenizer = deep
    at = app_test(page="pages/inside.py", model="dir:deep.pt", scheme="rope", text=SENTENCE, timeout=SLOW,
                  state={"inside_tab": "Head portraits", "inside_text": "the built-in story"})  # opened there,
    assert not at.exception, at.exception  # on the story: no other tab or text is computed
    assert at.radio(key="inside_text").value == "the built-in story"
    layers, heads = at.selectbox(key=f"inside_layer_{LAYERS}"), at.selectbox(key=f"inside_head_{HEADS}")
    assert list(layers.options) == [str(i) for i in range(1, LAYERS + 1)]
    assert list(heads.options) == [f"head {h + 1} (key head {h // 3 + 1})" for h in range(HEADS)]  # from 1
    at.session_state["inside_tab"] = "Head portraits"
    layers.set_value(LAYERS)
    heads.set_value(8)
    at.run()
    assert not at.exception, at.exception
    drawn = charts(at)
    grid = drawn["inside_heads"]
    assert grid["layout"]["title"]["text"] == f"Layer {LAYERS}: what each head does"
    assert grid["data"][0]["x"] == [f"h{h}" for h in range(1, HEADS + 1)] and len(grid["data"][0]["y"]) == len(SCHEMES)  # one row per scheme
    profile = drawn["inside_profile"]
    assert profile["layout"]["title"]["text"].startswith(f"Layer {LAYERS}, head 9")  # index 8, counted from 1
    line = next(t for t in profile["data"] if t["name"].startswith("rope"))
    # the same windows from the model's own trace: layer 30, head 8, mean weight 0 and 1 tokens back
    ids, _ = tokenizer.encode_known(corpus.story())
    windows = probe_text({"the built-in story": ids}, model=model).windows
    with torch.no_grad():
        weights = model.trace(windows).attention[LAYERS - 1][:, 8].double()  # (n, L, L)
    itself = weights.diagonal(dim1=-2, dim2=-1)[:, 1:].mean()
    previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean()
    np.testing.assert_allclose(values(line["y"])[:2], [float(itself), float(previous)], rtol=1e-4)
    assert "share key heads 1, 2, 3 in turn" in " ".join(c.value for c in at.caption)
    assert f"layer {LAYERS} of {LAYERS}**, {HEADS} heads:" in " ".join(m.value for m in at.markdown)  # this layer's reading


def test_rope_alibi_draws_the_chosen_layer_and_every_head(deep):
    model, tokenizer = deep
    at = app_test(page="pages/attention.py", model="dir:deep.pt", scheme="rope", text=SENTENCE, timeout=SLOW)
    assert not at.exception, at.exception
    layers, heads = at.selectbox(key=f"ra_layer_{LAYERS}"), at.selectbox(key=f"ra_head_{HEADS}")
    assert list(layers.options) == [str(i) for i in range(1, LAYERS + 1)]
    assert len(heads.options) == HEADS and heads.options[4] == "head 5 (key head 2)"
    layers.set_value(LAYERS - 1)  # the box holds 0-based indices, shown from 1
    heads.set_value(7)
    at.run()
    assert not at.exception, at.exception
    drawn = charts(at)["ra_attention"]
    ids, _ = tokenizer.encode_known(SENTENCE)
    with torch.no_grad():
        weights = model.trace(torch.tensor([ids])).attention[LAYERS - 1][0, 7]  # (T, T)
    assert drawn["layout"]["annotations"][0]["text"] == f"layer {LAYERS}, head 8"  # index 7, counted from 1
    np.testing.assert_allclose(values(drawn["data"][0]["z"]), weights.numpy(), atol=1e-6)
    assert any("query head 8 is compared with key head 3" in c.value for c in at.caption)


def test_order_blindness_offers_every_head(deep):
    at = app_test(page="pages/shuffle.py", model="dir:deep.pt", scheme="rope", text=SENTENCE, timeout=SLOW)
    assert not at.exception, at.exception
    heads = at.button_group(key="shuffle_head")
    assert len(heads.options) == HEADS
    heads.set_value(8).run()  # the last index, shown as head 9
    assert not at.exception, at.exception
    assert any(c["layout"]["title"]["text"].startswith("rope: layer 1, head 9") for c in charts(at).values()
               if "title" in c["layout"])
