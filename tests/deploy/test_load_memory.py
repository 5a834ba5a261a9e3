"""A model loaded from a memory-mapped file is held once: each tensor's file pages are let
go once copied into the model (lpos.checkpoints.payload.drop_file_pages), never anonymous memory."""
from __future__ import annotations

import sys

import pytest
import torch

from lpos import checkpoints
from lpos.checkpoints.payload import drop_file_pages, read_payload
from lpos.model import GPT, GPTConfig

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")


def _rss_file_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


def test_anonymous_memory_is_never_dropped():
    tensor = torch.arange(4 * 2**20, dtype=torch.float32)  # 16 MB of anonymous memory
    drop_file_pages(tensor)
    assert torch.equal(tensor, torch.arange(4 * 2**20, dtype=torch.float32))


@linux
def test_file_pages_go_and_the_values_stay(tmp_path):
    values = torch.randn(4 * 2**20)  # 16 MB
    torch.save({"w": values}, tmp_path / "w.pt")
    mapped = read_payload(tmp_path / "w.pt")["w"]
    assert float(mapped.sum()) == float(values.sum())  # every page read in
    before = _rss_file_kb()
    drop_file_pages(mapped)
    assert before - _rss_file_kb() > 8 * 1024  # most of the 16 MB of file pages are gone
    assert torch.equal(mapped, values)  # read again from the file when touched


def test_a_nanogpt_style_file_loads_the_same_weights(tmp_path):
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=16))
    state = {f"_orig_mod.{k}": v.clone() for k, v in model.state_dict().items()}
    config = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 50304, "bias": True}
    state["_orig_mod.transformer.wte.weight"] = torch.cat([state["_orig_mod.transformer.wte.weight"],
                                                           torch.zeros(47, 32)])
    state["_orig_mod.lm_head.weight"] = state["_orig_mod.transformer.wte.weight"]
    torch.save({"model": state, "model_args": config, "iter_num": 5}, tmp_path / "ckpt.pt")
    loaded, _ = checkpoints.load(tmp_path / "ckpt.pt")
    for key, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(loaded(ids)[0], model.eval()(ids)[0])


# --- activations: only what one step needs ---------------------------------------------------------

def test_chunk_losses_read_fewer_windows_at_once_when_attention_is_large(tiny_model, monkeypatch):
    from lpos.analysis import stretch

    model = tiny_model("rope", n_layer=2, n_head=4, n_embd=32, block_size=128)
    texts = torch.randint(0, 50257, (2, stretch.CHUNK + 1), generator=torch.Generator().manual_seed(0))
    whole = stretch.chunk_losses(model, texts, lengths=(128, 256))
    batches = []
    scored = model.vocab_loss

    def spy(x, *args, **kwargs):
        batches.append(len(x))
        return scored(x, *args, **kwargs)

    monkeypatch.setattr(model, "vocab_loss", spy)
    monkeypatch.setattr(stretch, "ATTENTION_ENTRIES", 4 * 128 * 128)  # one 128-token window of 4 heads
    one_by_one = stretch.chunk_losses(model, texts, lengths=(128, 256))
    assert set(batches) == {1}  # (256 tokens: not even one window fits the budget, so one at a time)
    assert len(batches) == 2 * 1024 // 128 + 2 * 1024 // 256
    for length in (128, 256):
        assert one_by_one[length]["tokens"] == whole[length]["tokens"] == 2 * 1024
        assert one_by_one[length]["loss"] == pytest.approx(whole[length]["loss"], abs=1e-4)  # rounded to 4 places


def test_one_layers_attention_map_is_the_trace_s(tiny_model):
    from lpos.analysis.attention import attention_maps

    model = tiny_model("alibi", n_layer=3)
    ids = list(range(100, 140))
    with torch.no_grad():
        traced = model.trace(torch.tensor([ids]))
    for layer in range(3):
        assert torch.equal(torch.from_numpy(attention_maps(model, ids, layer=layer)), traced.attention[layer][0])
    with pytest.raises(ValueError):
        attention_maps(model, ids, layer=3)
