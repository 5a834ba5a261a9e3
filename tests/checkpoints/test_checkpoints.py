"""Checkpoints: the lpos round trip (with the compact token table), files that must be refused
before anything runs, and every layout people save (nanoGPT, a trainer's dict with a pickled
config object, bare state_dicts, DDP/compile prefixes, a padded vocabulary, GPT-2's own keys, an
untied head), each checked against a forward pass of the original written out here with plain
torch ops: GPT-2's (Conv1D weights) and nanoGPT's (Linear weights)."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pickle
import re
import struct
import sys
import types
import zipfile

import pytest
import torch
from safetensors.torch import save_file
from torch.testing import assert_close

from lpos import checkpoints
from lpos.checkpoints import CheckpointError, available, describe, load, save
from lpos.checkpoints import NeedsHeadCount
from lpos.model import GPT, initial_token_table
from lpos.token_table import SharedTokenTable, shared_initial_table
from lpos.positions import SCHEMES
from lpos.tokenizer import GPT2

VOCAB = 50257
IDS = torch.tensor([[464, 3797, 3332, 319, 262, 2603, 13, 50256, 40, 1101]])  # "The cat sat on the mat.<eot>I'm"


# ---------------------------------------------------------------------------------------------
# an independent GPT-2: weights in Hugging Face layout (Conv1D: y = x @ W + b, W is (in, out))

def random_gpt2_weights(*, n_layer=2, n_head=2, n_embd=16, n_positions=32, vocab=VOCAB, bias=True, seed=0) -> dict:
    """Weights large enough that a wrong activation, transpose or mask shows in the logits."""
    g = torch.Generator().manual_seed(seed)
    C = n_embd

    def randn(*shape, std):
        return torch.randn(*shape, generator=g) * std

    w = {"wte.weight": randn(vocab, C, std=0.5), "wpe.weight": randn(n_positions, C, std=0.5)}
    for i in range(n_layer):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = 1 + randn(C, std=0.2)
        w[p + "attn.c_attn.weight"] = randn(C, 3 * C, std=0.6)
        w[p + "attn.c_proj.weight"] = randn(C, C, std=0.3)
        w[p + "ln_2.weight"] = 1 + randn(C, std=0.2)
        w[p + "mlp.c_fc.weight"] = randn(C, 4 * C, std=0.6)
        w[p + "mlp.c_proj.weight"] = randn(4 * C, C, std=0.3)
        if bias:
            for name, size in [("ln_1", C), ("attn.c_attn", 3 * C), ("attn.c_proj", C), ("ln_2", C),
                               ("mlp.c_fc", 4 * C), ("mlp.c_proj", C)]:
                w[p + name + ".bias"] = randn(size, std=0.1)
    w["ln_f.weight"] = 1 + randn(C, std=0.2)
    if bias:
        w["ln_f.bias"] = randn(C, std=0.1)
    return w


def gelu_exact(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def reference_logits(w: dict, ids: list[int], *, n_head: int, gelu) -> torch.Tensor:
    """GPT-2's forward pass, float64, one sequence -> (T, vocab)."""
    w = {k: v.double() for k, v in w.items()}
    T, C = len(ids), w["wte.weight"].shape[1]
    hs = C // n_head
    n_layer = len({k.split(".")[1] for k in w if k.startswith("h.")})

    def linear(x, name):
        return x @ w[name + ".weight"] + w.get(name + ".bias", 0)

    def layer_norm(x, name):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * w[name + ".weight"] + w.get(name + ".bias", 0)

    x = w["wte.weight"][ids] + w["wpe.weight"][:T]  # (T, C)
    for i in range(n_layer):
        p = f"h.{i}."
        q, k, v = linear(layer_norm(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
        heads = []
        for h in range(n_head):
            cols = slice(h * hs, (h + 1) * hs)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(hs)  # (T, T)
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ v[:, cols])
        x = x + linear(torch.cat(heads, dim=-1), p + "attn.c_proj")
        x = x + linear(gelu(linear(layer_norm(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return layer_norm(x, "ln_f") @ w["wte.weight"].T  # tied head


CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def logits_of(model: GPT, ids: torch.Tensor = IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(ids)[0][0]


# ---------------------------------------------------------------------------------------------
# lpos format

@pytest.mark.parametrize("scheme", SCHEMES)
def test_round_trip(tmp_path, tiny_model, scheme):
    model = tiny_model(scheme)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # not the initial values
    meta = {"val_loss": 3.25, "token_counts": {464: 12, 3797: 1}, "loss_by_length": {64: {"loss": 3.1}, 128: {"loss": None}}}
    save(model, meta, tmp_path / "m.pt")
    assert not (tmp_path / "m.pt.tmp").exists()
    loaded, loaded_meta = load(tmp_path / "m.pt")
    assert loaded.config == model.config
    assert loaded_meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert loaded_meta == meta
    assert not loaded.training
    assert loaded.output_vocab is None
    for key, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key
    assert torch.equal(logits_of(loaded), logits_of(model))
    payload = torch.load(tmp_path / "m.pt", weights_only=True)  # a plain dict, as the design says
    assert payload["format"] == "lpos" and payload["version"] == 1
    assert "lm_head.weight" not in payload["state_dict"]  # tied, stored once


def test_compact_token_table(tmp_path, tiny_model):
    model = tiny_model("learned", init_seed=5)
    vocab = torch.tensor([13, 262, 464, 2603, 3332, 3797, 50256])
    model.output_vocab = vocab
    with torch.no_grad():
        trained = torch.randn(len(vocab), 32) * 0.3
        model.transformer.wte.weight[vocab] = trained.half().float()  # what float16 storage keeps
        model.transformer.wpe.weight.mul_(3)
    save(model, {}, tmp_path / "compact.pt")
    loaded, _ = load(tmp_path / "compact.pt")

    assert torch.equal(loaded.output_vocab, vocab)
    initial = initial_token_table(model.config)
    untouched = torch.ones(VOCAB, dtype=torch.bool)
    untouched[vocab] = False
    table = loaded.transformer.wte.weight
    assert torch.equal(table[untouched], initial[untouched])  # rebuilt from init_seed, bit for bit
    assert torch.equal(table[vocab], trained.half().float())
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    assert torch.equal(logits_of(loaded, IDS[:, :7]), logits_of(model, IDS[:, :7]))
    assert torch.all(logits_of(loaded)[:, untouched] == float("-inf"))

    model.output_vocab = None
    save(model, {}, tmp_path / "full.pt")
    assert (tmp_path / "compact.pt").stat().st_size < (tmp_path / "full.pt").stat().st_size / 5


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_compact_file_loaded_over_the_shared_table_gives_the_dense_loads_numbers(tmp_path, tiny_model, scheme):
    model = tiny_model(scheme, init_seed=5)
    vocab = torch.tensor([13, 262, 464, 2603, 3332, 3797, 50256])
    model.output_vocab = vocab
    with torch.no_grad():
        model.transformer.wte.weight[vocab] = (torch.randn(len(vocab), 32) * 0.3).half().float()
    save(model, {}, tmp_path / "compact.pt")
    dense, _ = load(tmp_path / "compact.pt")
    shared, _ = load(tmp_path / "compact.pt", shared_table=True)

    wte = shared.transformer.wte
    assert isinstance(wte, SharedTokenTable) and shared.lm_head is None
    assert wte.base is shared_initial_table(5, VOCAB, 32)  # held once for every model of the seed, not copied
    assert torch.equal(wte.weight, dense.transformer.wte.weight)
    assert torch.equal(shared.output_vocab, vocab)
    assert torch.equal(logits_of(shared), logits_of(dense))
    assert shared.num_params() == dense.num_params()
    assert not shared.share_token_table(wte.base)  # already shared
    assert isinstance(dense.transformer.wte, torch.nn.Embedding)  # without the flag: the table the file describes


def test_shared_table_leaves_a_file_with_a_whole_table_as_it_is(tmp_path, tiny_model):
    save(tiny_model("rope"), {}, tmp_path / "whole.pt")  # no output vocabulary: every row is stored
    loaded, _ = load(tmp_path / "whole.pt", shared_table=True)
    assert isinstance(loaded.transformer.wte, torch.nn.Embedding)
    assert loaded.lm_head.weight is loaded.transformer.wte.weight


def test_compact_rows_are_stored_as_float16(tmp_path, tiny_model):
    model = tiny_model("none")
    model.output_vocab = torch.tensor([1, 2, 3])
    with torch.no_grad():
        model.transformer.wte.weight[1:4] = torch.randn(3, 32)
    save(model, {}, tmp_path / "m.pt")
    loaded, _ = load(tmp_path / "m.pt")
    rows = model.transformer.wte.weight[1:4].detach()
    assert torch.equal(loaded.transformer.wte.weight[1:4], rows.half().float())
    assert_close(loaded.transformer.wte.weight[1:4], rows, rtol=1e-3, atol=1e-4)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere.pt: no such file or folder"):
        load(tmp_path / "nowhere.pt")
    with pytest.raises(CheckpointError, match="no checkpoint named"):
        load("not-a-shipped-name")


def test_not_a_zip(tmp_path):
    path = tmp_path / "text.pt"
    path.write_text("hello, I am not a checkpoint\n" * 10)
    with pytest.raises(CheckpointError, match="not a PyTorch checkpoint"):
        load(path)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_file(tmp_path, tiny_model, keep):
    save(tiny_model("alibi"), {}, tmp_path / "m.pt")
    data = (tmp_path / "m.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match="cut.pt"):
        load(tmp_path / "cut.pt")


class WritesAMarker:
    """Unpickling this would create `path`: what a malicious checkpoint does."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_malicious_pickle_is_refused_unrun(tmp_path, tiny_model):
    marker = tmp_path / "marker"
    model = tiny_model("learned")
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    payload = {"format": "lpos", "version": 1, "config": {"position": "learned"}, "state_dict": state,
               "meta": {"note": WritesAMarker(marker)}}
    torch.save(payload, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="refuses to unpickle"):
        load(tmp_path / "evil.pt")
    assert not marker.exists()
    # the file really is malicious: a careless loader would have run it
    torch.load(tmp_path / "evil.pt", weights_only=False)["meta"]["note"].close()
    assert marker.exists()


def test_zip_bomb_is_refused_before_loading(tmp_path, monkeypatch):
    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("bomb/data.pkl", "w") as member:
            for _ in range(40):
                member.write(bytes(1 << 20))  # 40 MB of zeros
    assert path.stat().st_size < 1 << 20  # small on disk
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load must not be reached"))
    with pytest.raises(CheckpointError, match="unpacks to 40 MB, over the 10 MB limit"):
        load(path, max_bytes=10 << 20)


def test_declared_huge_size_is_refused_before_loading(tmp_path, tiny_model, monkeypatch):
    path = tmp_path / "m.pt"
    save(tiny_model("rope"), {}, path)
    data = bytearray(path.read_bytes())
    entry = data.find(b"PK\x01\x02")  # first central-directory record
    struct.pack_into("<I", data, entry + 24, 0xFFFF0000)  # its uncompressed size: ~4 GB
    path.write_bytes(bytes(data))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load must not be reached"))
    with pytest.raises(CheckpointError, match=r"m.pt unpacks to 4\d{3} MB, over the \d+ MB limit"):
        load(path)


def test_file_over_the_size_cap(tmp_path, tiny_model):
    save(tiny_model("none"), {}, tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match="the limit is 1 MB"):
        load(tmp_path / "m.pt", max_bytes=1 << 20)


def test_wrong_shapes_and_missing_tensors(tmp_path, tiny_model):
    save(tiny_model("learned"), {}, tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)

    payload["state_dict"]["transformer.h.0.attn.c_attn.weight"] = torch.zeros(96, 16)
    torch.save(payload, tmp_path / "shape.pt")
    with pytest.raises(CheckpointError, match=r"c_attn.weight has shape \(96, 16\), expected \(96, 32\)"):
        load(tmp_path / "shape.pt")

    payload["state_dict"].pop("transformer.h.0.attn.c_attn.weight")
    torch.save(payload, tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match="does not match the architecture"):
        load(tmp_path / "missing.pt")

    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    payload["config"]["n_embd"] = 64  # the tensors are 32 wide
    torch.save(payload, tmp_path / "config.pt")
    with pytest.raises(CheckpointError, match="has shape"):
        load(tmp_path / "config.pt")


def test_compact_rows_of_the_wrong_shape(tmp_path, tiny_model):
    model = tiny_model("learned")
    model.output_vocab = torch.tensor([5, 6])
    save(model, {}, tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    payload["state_dict"]["transformer.wte.rows"] = torch.zeros(3, 32, dtype=torch.float16)
    torch.save(payload, tmp_path / "rows.pt")
    with pytest.raises(CheckpointError, match="token rows of the wrong shape"):
        load(tmp_path / "rows.pt")


# ---------------------------------------------------------------------------------------------
# nanoGPT ckpt.pt

def nanogpt_checkpoint(w: dict, *, n_head: int, block_size: int, bias: bool, compiled: bool, mask_buffer: bool) -> dict:
    """What nanoGPT's train.py writes: Linear layout, vocabulary padded to 50304, tied head."""
    prefix = "_orig_mod." if compiled else ""
    C = w["wte.weight"].shape[1]
    padded = torch.cat([w["wte.weight"], torch.randn(50304 - VOCAB, C)])
    state = {f"{prefix}transformer.wte.weight": padded, f"{prefix}lm_head.weight": padded}
    for key, tensor in w.items():
        if key != "wte.weight":
            state[f"{prefix}transformer.{key}"] = tensor.T.contiguous() if key.endswith(CONV1D) else tensor
    n_layer = len({k.split(".")[1] for k in w if k.startswith("h.")})
    if mask_buffer:  # nanoGPT without flash attention keeps its causal mask as a buffer
        for i in range(n_layer):
            state[f"{prefix}transformer.h.{i}.attn.bias"] = torch.ones(block_size, block_size).tril().view(1, 1, block_size, block_size)
    model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=C, block_size=block_size, bias=bias, vocab_size=50304, dropout=0.1)
    return {"model": state, "model_args": model_args, "iter_num": 5000, "best_val_loss": torch.tensor(1.4697),
            "optimizer": {"state": {}, "param_groups": [{"lr": 6e-4, "betas": (0.9, 0.95), "params": [0, 1]}]},
            "config": {"dataset": "openwebtext", "batch_size": 12, "compile": compiled}}


@pytest.mark.parametrize(
    "bias,compiled,mask_buffer", [(True, True, False), (True, False, True), (False, True, False)]
)
def test_nanogpt_checkpoint(tmp_path, bias, compiled, mask_buffer):
    w = random_gpt2_weights(bias=bias, n_positions=24, seed=1)
    torch.save(nanogpt_checkpoint(w, n_head=2, block_size=24, bias=bias, compiled=compiled, mask_buffer=mask_buffer),
               tmp_path / "ckpt.pt")
    model, meta = load(tmp_path / "ckpt.pt")
    assert model.config.vocab_size == VOCAB and model.config.activation == "gelu"
    assert model.config.position == "learned" and model.config.block_size == 24 and model.config.bias == bias
    assert meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert meta == {"source": "nanoGPT ckpt.pt" + ("; _orig_mod. prefixes removed" if compiled else ""),
                    "iter_num": 5000, "best_val_loss": pytest.approx(1.4697),
                    "ignored": ["optimizer", "config", *(["2 causal-mask buffers"] if mask_buffer else []),
                                "token rows 50,257-50,303 (padding, never a token)"]}
    expected = reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_exact)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    # the check has teeth: GPT-2's tanh GELU gives visibly different logits
    wrong = reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_tanh)
    assert float((wrong - expected).abs().max()) > 1e-3


def test_nanogpt_character_vocabulary_is_refused(tmp_path):
    w = random_gpt2_weights(n_positions=8)
    payload = nanogpt_checkpoint(w, n_head=2, block_size=8, bias=True, compiled=False, mask_buffer=False)
    payload["model_args"]["vocab_size"] = 65
    torch.save(payload, tmp_path / "ckpt.pt")
    with pytest.raises(checkpoints.NeedsTokenizer, match="vocabulary of 65 rows, not GPT-2's 50,257 tokens, so it needs "
                                                         "its own tokenizer: give nanoGPT's meta.pkl"):
        load(tmp_path / "ckpt.pt")


# ---------------------------------------------------------------------------------------------
# Hugging Face GPT-2 folder

def hf_folder(path, w: dict, *, n_head: int, n_positions: int, activation="gelu_new", prefix="", buffers=True,
              vocab_size=VOCAB):
    """config.json + model.safetensors as transformers writes them for GPT-2."""
    path.mkdir()
    C = w["wte.weight"].shape[1]
    n_layer = len({k.split(".")[1] for k in w if k.startswith("h.")})
    tensors = {prefix + k: v.contiguous() for k, v in w.items()}
    if buffers:  # older transformers saved the causal mask and masked_bias with the weights
        for i in range(n_layer):
            tensors[f"{prefix}h.{i}.attn.bias"] = torch.ones(n_positions, n_positions).tril().view(1, 1, n_positions, n_positions)
            tensors[f"{prefix}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, str(path / "model.safetensors"))
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab_size,
              "n_positions": n_positions, "n_ctx": n_positions, "n_embd": C, "n_layer": n_layer, "n_head": n_head,
              "activation_function": activation, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1}
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("prefix,buffers", [("", True), ("transformer.", False)])
def test_hugging_face_folder(tmp_path, prefix, buffers):
    w = random_gpt2_weights(n_positions=32, seed=2)
    folder = hf_folder(tmp_path / "gpt2-tiny", w, n_head=2, n_positions=32, prefix=prefix, buffers=buffers)
    model, meta = load(folder)
    keys = "GPT2Model keys, " if prefix == "" else ""
    assert meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert meta == {"source": f"Hugging Face GPT-2 folder (config.json + model.safetensors); {keys}Conv1D weights transposed",
                    "ignored": ["4 causal-mask buffers"] if buffers else []}
    assert model.config.activation == "gelu_tanh" and model.config.block_size == 32
    expected = reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_tanh)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    assert float((reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_exact) - expected).abs().max()) > 1e-3


def test_hugging_face_exact_gelu(tmp_path):
    w = random_gpt2_weights(n_positions=16, seed=3)
    model, _ = load(hf_folder(tmp_path / "m", w, n_head=2, n_positions=16, activation="gelu"))
    assert model.config.activation == "gelu"
    assert_close(logits_of(model).double(), reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_exact), rtol=0, atol=1e-4)


def test_hugging_face_small_vocabulary_is_refused(tmp_path):
    w = random_gpt2_weights(n_positions=8, vocab=1000)
    with pytest.raises(CheckpointError, match="vocabulary of 1,000 rows"):
        load(hf_folder(tmp_path / "m", w, n_head=2, n_positions=8, vocab_size=1000))


def test_hugging_face_folder_needs_both_files(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match=r"config.json and model.safetensors or pytorch_model.bin \(Hugging Face GPT-2 folder\)"):
        load(tmp_path / "half")


def test_hugging_face_sizes_missing_from_config_json_come_from_the_shapes(tmp_path):
    w = random_gpt2_weights(n_positions=16, seed=4)
    folder = hf_folder(tmp_path / "m", w, n_head=2, n_positions=16)
    config = json.loads((folder / "config.json").read_text())
    for key in ("n_layer", "n_embd", "n_positions", "vocab_size"):
        del config[key]
    (folder / "config.json").write_text(json.dumps(config))
    model, _ = load(folder)
    assert (model.config.n_layer, model.config.n_embd, model.config.block_size) == (2, 16, 16)
    assert_close(logits_of(model).double(), reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_tanh), rtol=0, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# the layouts people save, each built here from random weights and checked against the original

def nanogpt_state(w: dict, *, head: torch.Tensor | None = None) -> dict:
    """The weights of `w` as a nanoGPT model's state_dict: `transformer.` names, nn.Linear layout,
    lm_head tied to the token table unless `head` is given."""
    state = {f"transformer.{k}": (v.T.contiguous() if k.endswith(CONV1D) else v) for k, v in w.items()}
    state["lm_head.weight"] = state["transformer.wte.weight"] if head is None else head
    return state


def reference_nanogpt_logits(state: dict, ids: list[int], *, n_head: int) -> torch.Tensor:
    """nanoGPT's forward pass over its own state_dict names (nn.Linear: y = x W^T + b), float64,
    one sequence -> (T, rows of lm_head)."""
    w = {k: v.double() for k, v in state.items()}
    T, C = len(ids), w["transformer.wte.weight"].shape[1]
    hs = C // n_head

    def linear(x, name):
        return x @ w[name + ".weight"].T + w.get(name + ".bias", 0)

    def layer_norm(x, name):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt((centred**2).mean(-1, keepdim=True) + 1e-5) * w[name + ".weight"] + w.get(name + ".bias", 0)

    future = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]  # (T, C)
    for i in sorted({int(k.split(".")[2]) for k in w if k.startswith("transformer.h.")}):
        p = f"transformer.h.{i}."
        q, k, v = (t.view(T, n_head, hs).transpose(0, 1) for t in linear(layer_norm(x, p + "ln_1"), p + "attn.c_attn").split(C, -1))
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hs) + future, dim=-1)  # (nh, T, T)
        x = x + linear((weights @ v).transpose(0, 1).reshape(T, C), p + "attn.c_proj")
        x = x + linear(gelu_exact(linear(layer_norm(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return layer_norm(x, "transformer.ln_f") @ w["lm_head.weight"].T


@dataclasses.dataclass
class SeedConfig:
    """The trainer's own config class, as the Tiny Children Stories trainer's src/model/gpt.py has it."""

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 6
    n_head: int = 8
    n_embd: int = 512
    dropout: float = 0.1
    bias: bool = True


TRAINER_MODULE = "src.model.gpt"
SeedConfig.__name__ = SeedConfig.__qualname__ = "GPTConfig"


@contextlib.contextmanager
def importable_from_trainer_module(cls):
    """While a file is written, `cls` is src.model.gpt.GPTConfig, as in the trainer's own process."""
    modules = {name: types.ModuleType(name) for name in ("src", "src.model", TRAINER_MODULE)}
    setattr(modules[TRAINER_MODULE], cls.__name__, cls)
    cls.__module__ = TRAINER_MODULE
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name in modules:
            sys.modules.pop(name, None)


def seed_trainer_payload(w: dict, *, n_head: int, block_size: int, config=None) -> dict:
    """What the seed trainer saves: blocks named ln1/ln2, Adam's state, the config object."""
    state = {k.replace(".ln_1.", ".ln1.").replace(".ln_2.", ".ln2."): v for k, v in nanogpt_state(w).items()}
    adam = {i: {"step": torch.tensor(100.0), "exp_avg": torch.zeros_like(t), "exp_avg_sq": torch.zeros_like(t)}
            for i, t in enumerate(state.values())}
    n_layer = len({k.split(".")[1] for k in w if k.startswith("h.")})
    config = config or SeedConfig(block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=w["wte.weight"].shape[1])
    return {"model": state, "optimizer": {"state": adam, "param_groups": [{"lr": 3e-4, "params": list(adam)}]},
            "iter_num": 20000, "loss": 2.31, "config": config}


def seed_trainer_file(path, w: dict, *, n_head: int = 2, block_size: int = 24, config=None):
    with importable_from_trainer_module(SeedConfig):
        torch.save(seed_trainer_payload(w, n_head=n_head, block_size=block_size, config=config), path)
    return path


def test_seed_trainer_dict_with_a_pickled_config_object(tmp_path):
    w = random_gpt2_weights(n_positions=24, seed=5)
    path = seed_trainer_file(tmp_path / "best_model.pt", w)
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == ["src.model.gpt.GPTConfig"]
    with pytest.raises(pickle.UnpicklingError):  # what lpos did before: weights_only refuses the object
        torch.load(path, weights_only=True)
    model, meta = load(path)
    assert TRAINER_MODULE not in sys.modules  # the trainer's module was never imported
    c = model.config
    assert (c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, c.tied, c.dropout) == (2, 2, 16, 24, VOCAB, True, 0.1)
    assert meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert meta == {"source": "trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); "
                              "blocks named ln1/ln2",
                    "iter_num": 20000, "loss": pytest.approx(2.31), "ignored": ["optimizer"]}
    expected = reference_nanogpt_logits(nanogpt_state(w), IDS[0].tolist(), n_head=2)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    parameters = sum(v.numel() for k, v in nanogpt_state(w).items() if k != "lm_head.weight")
    assert describe(model, meta) == [
        "read as: trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); blocks named ln1/ln2",
        f"2 layers, 2 heads, width 16, 24 position rows, vocabulary 50,257, head tied to the token table, "
        f"{parameters / 1e3:,.0f}K parameters",  # 0.8M: never printed as "0.8M" or "0.0M"
        "ignored: optimizer"]


def test_describe_counts_one_in_the_singular_and_a_small_model_in_thousands():
    from conftest import seeded_model

    tiny = seeded_model("learned", n_layer=1, n_head=1, n_embd=16, block_size=8, vocab_size=65)
    line = describe(tiny, {"source": "nanoGPT ckpt.pt"})[1]
    assert line.startswith("1 layer, 1 head, width 16, 8 position rows, vocabulary 65,")
    assert line.endswith(f"{tiny.num_params():,} parameters") and tiny.num_params() < 10_000  # not "0.0M parameters"
    small = seeded_model("learned", n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=512)
    assert describe(small, {})[1].endswith(f"{round(small.num_params() / 1e3)}K parameters")


def test_pickled_config_keeps_plain_values_only(tmp_path):
    config = SeedConfig(n_layer=2, n_head=2, n_embd=16, block_size=24)
    config.__dict__.update({"__setstate__": "not a method", "_private": 1, "nested": {"a": 1}, "shape": (1, 2)})
    path = seed_trainer_file(tmp_path / "m.pt", random_gpt2_weights(n_positions=24), config=config)
    stand_in = checkpoints.read_payload(path)["config"]
    assert isinstance(stand_in, checkpoints.PickledConfig) and not hasattr(stand_in, "__dict__")
    assert stand_in.source == "src.model.gpt.GPTConfig"
    assert stand_in.fields == dict(vocab_size=VOCAB, block_size=24, n_layer=2, n_head=2, n_embd=16, dropout=0.1, bias=True)


@pytest.mark.parametrize("mask_buffers", [False, True])
def test_bare_state_dict_asks_for_and_takes_a_head_count(tmp_path, mask_buffers):
    w = random_gpt2_weights(n_positions=24, seed=6)
    state = nanogpt_state(w)
    if mask_buffers:  # what nanoGPT saves when it runs without flash attention
        for i in range(2):
            state[f"transformer.h.{i}.attn.bias"] = torch.ones(24, 24).tril().view(1, 1, 24, 24)
    torch.save(state, tmp_path / "model.pt")
    with pytest.raises(NeedsHeadCount) as error:
        load(tmp_path / "model.pt")
    assert str(error.value) == ("model.pt does not say how many attention heads it has: give n_head, one of "
                                "1, 2, 4, 8, 16 (the numbers that divide its width, 16)")
    assert error.value.width == 16
    model, meta = load(tmp_path / "model.pt", n_head=2)
    assert meta["source"] == "bare state_dict"
    assert meta["ignored"] == (["2 causal-mask buffers"] if mask_buffers else [])
    expected = reference_nanogpt_logits(state, IDS[0].tolist(), n_head=2)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    other, _ = load(tmp_path / "model.pt", n_head=4)  # the head count matters: a wrong one gives other logits
    assert float((logits_of(other).double() - expected).abs().max()) > 1e-2


@pytest.mark.parametrize("prefix", ["module.", "module._orig_mod.", "_orig_mod.module."])
def test_ddp_and_compile_prefixes(tmp_path, prefix):
    w = random_gpt2_weights(n_positions=24, seed=7)
    state = nanogpt_state(w)
    args = dict(n_layer=2, n_head=2, n_embd=16, block_size=24, bias=True, vocab_size=VOCAB, dropout=0.0)
    torch.save({"model": {prefix + k: v for k, v in state.items()}, "model_args": args, "iter_num": 3}, tmp_path / "ckpt.pt")
    model, meta = load(tmp_path / "ckpt.pt")
    removed = ", ".join(f"{p}. prefixes removed" for p in prefix.rstrip(".").split("."))
    assert meta["source"] == f"nanoGPT ckpt.pt; {removed}"
    assert_close(logits_of(model).double(), reference_nanogpt_logits(state, IDS[0].tolist(), n_head=2), rtol=0, atol=1e-4)


def test_padded_vocabulary_of_50304_rows(tmp_path):
    w = random_gpt2_weights(n_positions=24, seed=8)
    padded = torch.cat([w["wte.weight"], torch.randn(50304 - VOCAB, 16) * 5])  # loud rows: none may be offered
    state = nanogpt_state({**w, "wte.weight": padded})
    torch.save(state, tmp_path / "model.pt")
    model, meta = load(tmp_path / "model.pt", n_head=2)
    assert model.config.vocab_size == VOCAB and model.config.tied
    assert model.transformer.wte.weight.shape == (VOCAB, 16) and logits_of(model).shape == (IDS.shape[1], VOCAB)
    assert "token rows 50,257-50,303 (padding, never a token)" in meta["ignored"]
    expected = reference_nanogpt_logits(state, IDS[0].tolist(), n_head=2)  # (T, 50304)
    assert_close(logits_of(model).double(), expected[:, :VOCAB], rtol=0, atol=1e-4)


@pytest.mark.parametrize("rows, message", [
    (100277, "has a vocabulary of 100,277 rows, not GPT-2's 50,257 tokens, so it needs its own tokenizer: give "),
    (32000, "has a vocabulary of 32,000 rows, not GPT-2's 50,257 tokens, so it needs its own tokenizer: give "),
])
def test_another_tokenizer_is_refused_naming_both_sizes(tmp_path, rows, message):
    w = random_gpt2_weights(n_positions=8, vocab=rows)
    torch.save(nanogpt_state(w), tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match=re.escape(f"model.pt {message}")):
        load(tmp_path / "model.pt", n_head=2)


def gpt2model_state(w: dict, *, n_positions: int) -> dict:
    """GPT2Model.state_dict() as transformers saves it in pytorch_model.bin: Conv1D weights, no
    `transformer.` prefix, no lm_head, the causal mask and masked_bias buffers."""
    state = dict(w)
    for i in range(len({k.split(".")[1] for k in w if k.startswith("h.")})):
        state[f"h.{i}.attn.bias"] = torch.ones(n_positions, n_positions).tril().view(1, 1, n_positions, n_positions)
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return state


def test_gpt2model_keys_in_pytorch_model_bin(tmp_path):
    w = random_gpt2_weights(n_positions=32, seed=9)
    folder = tmp_path / "gpt2-tiny"
    folder.mkdir()
    torch.save(gpt2model_state(w, n_positions=32), folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": VOCAB, "n_positions": 32,
                                                    "n_embd": 16, "n_layer": 2, "n_head": 2}))
    model, meta = load(folder)
    assert meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert meta == {"source": "Hugging Face GPT-2 folder (config.json + pytorch_model.bin); GPT2Model keys, "
                              "Conv1D weights transposed", "ignored": ["4 causal-mask buffers"]}
    expected = reference_logits(w, IDS[0].tolist(), n_head=2, gelu=gelu_tanh)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    alone, _ = load(folder / "pytorch_model.bin", n_head=2)  # without config.json: GPT-2's tanh GELU from the keys
    assert alone.config.activation == "gelu_tanh" and alone.config.block_size == 32
    assert_close(logits_of(alone).double(), expected, rtol=0, atol=1e-4)


def test_untied_head_gives_the_files_own_logits(tmp_path):
    w = random_gpt2_weights(n_positions=24, seed=10)
    state = nanogpt_state(w, head=torch.randn(VOCAB, 16, generator=torch.Generator().manual_seed(11)) * 0.5)
    args = dict(n_layer=2, n_head=2, n_embd=16, block_size=24, bias=True, vocab_size=VOCAB)
    torch.save({"model": state, "model_args": args}, tmp_path / "ckpt.pt")
    model, _ = load(tmp_path / "ckpt.pt")
    assert not model.config.tied and model.lm_head.weight is not model.transformer.wte.weight
    expected = reference_nanogpt_logits(state, IDS[0].tolist(), n_head=2)
    assert_close(logits_of(model).double(), expected, rtol=0, atol=1e-4)
    as_if_tied = reference_nanogpt_logits({**state, "lm_head.weight": state["transformer.wte.weight"]}, IDS[0].tolist(), n_head=2)
    assert float((as_if_tied - expected).abs().max()) > 1  # what lpos showed before: other predictions everywhere
    with torch.no_grad():  # the loss the app scores with uses the head's own rows too
        assert_close(model.vocab_loss(IDS[:, :-1], IDS[:, 1:]), model(IDS[:, :-1], IDS[:, 1:])[1])
    save(model, {}, tmp_path / "untied.pt")
    assert "lm_head.weight" in torch.load(tmp_path / "untied.pt", weights_only=True)["state_dict"]
    again, _ = load(tmp_path / "untied.pt")
    assert not again.config.tied and torch.equal(logits_of(again), logits_of(model))


def test_lpos_file_saying_tied_with_another_head_is_refused(tmp_path, tiny_model):
    save(tiny_model("learned", tied=False), {}, tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    payload["config"]["tied"] = True
    torch.save(payload, tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match="says its head is tied to the token table, but lm_head.weight holds other values"):
        load(tmp_path / "m.pt")


# ---------------------------------------------------------------------------------------------
# shipped checkpoints (trained in the background; each test runs once its file exists)

@pytest.mark.parametrize("scheme", SCHEMES)
def test_shipped_checkpoint(scheme):
    if scheme not in available():
        pytest.skip(f"checkpoints/{scheme}.pt is not trained yet")
    path = checkpoints.CHECKPOINT_DIR / f"{scheme}.pt"
    assert path.stat().st_size < 8 * 2**20
    model, meta = load(scheme)
    assert model.config.position == scheme
    assert model.output_vocab is not None
    assert set(meta["token_counts"]) == set(model.output_vocab.tolist())
    untouched = torch.ones(VOCAB, dtype=torch.bool)
    untouched[model.output_vocab] = False
    assert torch.equal(model.transformer.wte.weight[untouched], initial_token_table(model.config)[untouched])
    for key in ("val_loss", "unigram_val_loss", "val_oov_share", "tokens_trained", "steps", "wall_seconds", "machine"):
        assert key in meta, key
    assert meta["val_loss"] < meta["unigram_val_loss"]  # it learned more than word frequencies
    by_length = meta["loss_by_length"]
    assert set(by_length) >= {64, 128, 256, 512, 1024}
    if scheme == "learned":
        assert by_length[1024] == {"loss": None, "note": f"n/a: the table has {model.config.block_size} rows"}
    else:
        assert by_length[1024]["loss"] is not None


def test_a_missing_checkpoint_file_is_called_a_missing_file():
    with pytest.raises(checkpoints.CheckpointError, match=r"^model\.pt: no such file or folder"):
        checkpoints.load("model.pt")
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint named 'alibii'"):
        checkpoints.load("alibii")
