"""Models from the from-scratch courses, each built here from small random weights, saved the way
its course saves it, loaded with lpos and compared, at every position, with a forward pass
written in this file from the course's own maths (float64):

- "Build a Large Language Model (From Scratch)" GPTModel: LayerNorm scale/shift (biased variance,
  eps 1e-5), tanh GELU, W_query/W_key/W_value (bias only with qkv_bias), out_head untied.
- Karpathy's "Let's build GPT" lecture: one Linear per head (no bias), scores scaled by the head
  size, ReLU feed-forward, lm_head with a bias, a character vocabulary.
- nanoGPT's shakespeare_char: a nanoGPT ckpt.pt (bias=False) with its characters in meta.pkl.
- a Hugging Face GPT-2 with its own BPE (transformers' GPT2LMHeadModel is the reference).
"""
from __future__ import annotations

import json
import math
import pickle

import pytest
import torch
from torch.testing import assert_close

from lpos import checkpoints
from lpos.checkpoints import CheckpointError, NeedsHeadCount, NeedsTokenizer, load
from lpos.cli import main
from lpos.tokenizer import GPT2

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak!"
CHARS = sorted(set(TEXT))
V = len(CHARS)  # 31


def randn(g, *shape, std):
    return torch.randn(*shape, generator=g) * std


def layer_norm(x, scale, shift, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return scale * (x - mean) / torch.sqrt(var + eps) + (0 if shift is None else shift)


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def causal_softmax(scores):
    T = scores.shape[-1]
    return torch.softmax(scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf")), dim=-1)


def logits_of(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids]))[0][0].double()  # (T, vocab)


# ---------------------------------------------------------------------------------------------
# Build a Large Language Model (From Scratch): GPTModel

def raschka_weights(*, vocab, n_layer=2, C=16, context=24, qkv_bias, seed=0) -> dict:
    g = torch.Generator().manual_seed(seed)
    w = {"tok_emb.weight": randn(g, vocab, C, std=0.5), "pos_emb.weight": randn(g, context, C, std=0.5)}
    for i in range(n_layer):
        p = f"trf_blocks.{i}."
        for name in ("W_query", "W_key", "W_value"):
            w[p + f"att.{name}.weight"] = randn(g, C, C, std=0.4)
            if qkv_bias:
                w[p + f"att.{name}.bias"] = randn(g, C, std=0.2)
        w[p + "att.out_proj.weight"], w[p + "att.out_proj.bias"] = randn(g, C, C, std=0.3), randn(g, C, std=0.1)
        w[p + "att.mask"] = torch.ones(context, context).triu(1)  # the book's registered buffer
        w[p + "ff.layers.0.weight"], w[p + "ff.layers.0.bias"] = randn(g, 4 * C, C, std=0.5), randn(g, 4 * C, std=0.1)
        w[p + "ff.layers.2.weight"], w[p + "ff.layers.2.bias"] = randn(g, C, 4 * C, std=0.3), randn(g, C, std=0.1)
        for norm in ("norm1", "norm2"):
            w[p + f"{norm}.scale"], w[p + f"{norm}.shift"] = 1 + randn(g, C, std=0.2), randn(g, C, std=0.1)
    w["final_norm.scale"], w["final_norm.shift"] = 1 + randn(g, C, std=0.2), randn(g, C, std=0.1)
    w["out_head.weight"] = randn(g, vocab, C, std=0.5)
    return w


def raschka_logits(w: dict, ids: list[int], *, n_head: int) -> torch.Tensor:
    """GPTModel.forward: x = tok_emb + pos_emb; per block x += att(norm1(x)), x += ff(norm2(x))."""
    w = {k: v.double() for k, v in w.items()}
    T, C = len(ids), w["tok_emb.weight"].shape[1]
    hd = C // n_head
    x = w["tok_emb.weight"][ids] + w["pos_emb.weight"][:T]
    layers = len({k.split(".")[1] for k in w if k.startswith("trf_blocks.")})

    def linear(h, name):
        return h @ w[name + ".weight"].T + w.get(name + ".bias", 0)

    for i in range(layers):
        p = f"trf_blocks.{i}."
        h = layer_norm(x, w[p + "norm1.scale"], w[p + "norm1.shift"])
        q, k, v = (linear(h, p + f"att.{n}").view(T, n_head, hd).transpose(0, 1) for n in ("W_query", "W_key", "W_value"))
        context = (causal_softmax(q @ k.transpose(1, 2) / hd**0.5) @ v).transpose(0, 1).reshape(T, C)
        x = x + linear(context, p + "att.out_proj")
        h = layer_norm(x, w[p + "norm2.scale"], w[p + "norm2.shift"])
        x = x + linear(gelu_tanh(linear(h, p + "ff.layers.0")), p + "ff.layers.2")
    return layer_norm(x, w["final_norm.scale"], w["final_norm.shift"]) @ w["out_head.weight"].T


IDS = [464, 3797, 3332, 319, 262, 2603, 13, 50256, 40, 1101]


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("saved_as", ["state_dict", "chapter 5 dict"])
def test_raschka_gpt_model(tmp_path, qkv_bias, saved_as):
    w = raschka_weights(vocab=50257, qkv_bias=qkv_bias)
    payload = dict(w) if saved_as == "state_dict" else {"model_state_dict": dict(w), "optimizer_state_dict": {"state": {}}}
    torch.save(payload, tmp_path / "model.pth")
    with pytest.raises(NeedsHeadCount):  # the book's files do not say n_head
        load(tmp_path / "model.pth")
    model, meta = load(tmp_path / "model.pth", n_head=2)
    c = model.config
    assert (c.activation, c.tied, c.head_bias, c.bias, c.block_size) == ("gelu_tanh", False, False, True, 24)
    assert c.qkv_bias == (None if qkv_bias else False)
    assert meta["tokenizer"] is GPT2 and meta["source"].startswith("Build a Large Language Model")
    assert "2 causal-mask buffers" in meta["ignored"]
    expected = raschka_logits(w, IDS, n_head=2)
    assert_close(logits_of(model, IDS), expected, rtol=0, atol=1e-4)
    assert float((raschka_logits(w, IDS, n_head=4) - expected).abs().max()) > 1e-3  # the head count matters


# ---------------------------------------------------------------------------------------------
# Karpathy's "Let's build GPT" lecture (gpt.py)

def lecture_weights(*, vocab, n_layer=2, n_head=4, C=16, block=32, seed=1) -> dict:
    g = torch.Generator().manual_seed(seed)
    hs = C // n_head
    w = {"token_embedding_table.weight": randn(g, vocab, C, std=0.5),
         "position_embedding_table.weight": randn(g, block, C, std=0.5)}
    for i in range(n_layer):
        p = f"blocks.{i}."
        for m in range(n_head):
            for name in ("key", "query", "value"):
                w[p + f"sa.heads.{m}.{name}.weight"] = randn(g, hs, C, std=0.5)
            w[p + f"sa.heads.{m}.tril"] = torch.ones(block, block).tril()
        w[p + "sa.proj.weight"], w[p + "sa.proj.bias"] = randn(g, C, C, std=0.3), randn(g, C, std=0.1)
        w[p + "ffwd.net.0.weight"], w[p + "ffwd.net.0.bias"] = randn(g, 4 * C, C, std=0.5), randn(g, 4 * C, std=0.1)
        w[p + "ffwd.net.2.weight"], w[p + "ffwd.net.2.bias"] = randn(g, C, 4 * C, std=0.3), randn(g, C, std=0.1)
        for norm in ("ln1", "ln2"):
            w[p + f"{norm}.weight"], w[p + f"{norm}.bias"] = 1 + randn(g, C, std=0.2), randn(g, C, std=0.1)
    w["ln_f.weight"], w["ln_f.bias"] = 1 + randn(g, C, std=0.2), randn(g, C, std=0.1)
    w["lm_head.weight"], w["lm_head.bias"] = randn(g, vocab, C, std=0.5), randn(g, vocab, std=0.5)
    return w


def converted_character_model(folder, *, block: int = 64):
    """The lecture's character model saved as the lecture saves it, with its training text, then
    converted with its tokenizer into folder/shared/chars.pt (what a teacher's shared folder holds).
    Returns the shared folder."""
    torch.save(lecture_weights(vocab=V, block=block), folder / "lecture.pt")
    (folder / "input.txt").write_text(TEXT)
    shared = folder / "shared"
    assert main(["convert", str(folder / "lecture.pt"), "--out", str(shared / "chars.pt"),
                 "--tokenizer", str(folder / "input.txt")]) == 0
    return shared


def lecture_logits(w: dict, ids: list[int], *, n_head: int) -> torch.Tensor:
    """BigramLanguageModel.forward of gpt.py: heads concatenated, wei = q k^T * hs^-0.5, ReLU."""
    w = {k: v.double() for k, v in w.items()}
    T = len(ids)
    x = w["token_embedding_table.weight"][ids] + w["position_embedding_table.weight"][:T]
    layers = len({k.split(".")[1] for k in w if k.startswith("blocks.")})

    def linear(h, name):
        return h @ w[name + ".weight"].T + w.get(name + ".bias", 0)

    for i in range(layers):
        p = f"blocks.{i}."
        h = layer_norm(x, w[p + "ln1.weight"], w[p + "ln1.bias"])
        outs = []
        for m in range(n_head):
            k, q, v = (linear(h, p + f"sa.heads.{m}.{n}") for n in ("key", "query", "value"))
            outs.append(causal_softmax(q @ k.T * k.shape[-1] ** -0.5) @ v)
        x = x + linear(torch.cat(outs, dim=-1), p + "sa.proj")
        h = layer_norm(x, w[p + "ln2.weight"], w[p + "ln2.bias"])
        x = x + linear(torch.relu(linear(h, p + "ffwd.net.0")), p + "ffwd.net.2")
    return linear(layer_norm(x, w["ln_f.weight"], w["ln_f.bias"]), "lm_head")


def test_lecture_gpt_with_its_characters(tmp_path):
    w = lecture_weights(vocab=len(CHARS))
    torch.save(w, tmp_path / "model.pt")
    (tmp_path / "input.txt").write_text(TEXT)
    with pytest.raises(NeedsTokenizer, match=f"vocabulary of {V} rows, not GPT-2's 50,257 tokens, .*training text"):
        load(tmp_path / "model.pt")
    model, meta = load(tmp_path / "model.pt", tokenizer=tmp_path / "input.txt")
    c = model.config
    assert (c.n_head, c.activation, c.head_bias, c.qkv_bias, c.tied, c.vocab_size) == (4, "relu", True, False, False, V)
    tokenizer = meta["tokenizer"]
    ids = tokenizer.encode(TEXT[:30])
    assert ids == [CHARS.index(ch) for ch in TEXT[:30]]  # the lecture's stoi
    expected = lecture_logits(w, ids, n_head=4)
    assert_close(logits_of(model, ids), expected, rtol=0, atol=1e-4)
    no_bias = lecture_logits({**w, "lm_head.bias": torch.zeros(len(CHARS))}, ids, n_head=4)
    assert float((no_bias - expected).abs().max()) > 1e-3  # the head's bias matters
    with torch.no_grad():
        loss = model.vocab_loss(torch.tensor([ids[:-1]]), torch.tensor([ids[1:]]))
    reference = torch.nn.functional.cross_entropy(expected[:-1], torch.tensor(ids[1:]))
    assert abs(float(loss) - float(reference)) < 1e-4  # the loss reads the bias too


def test_convert_keeps_the_tokenizer(tmp_path, capsys):
    w = lecture_weights(vocab=len(CHARS))
    torch.save(w, tmp_path / "model.pt")
    (tmp_path / "input.txt").write_text(TEXT)
    out = tmp_path / "shared" / "lecture.pt"
    assert main(["convert", str(tmp_path / "model.pt"), "--out", str(out), "--tokenizer", str(tmp_path / "input.txt")]) == 0
    payload = torch.load(out, weights_only=True)  # plain data only
    assert payload["meta"]["tokenizer"]["kind"] == "characters"
    model, meta = load(out)
    assert meta["tokenizer"].encode("Speak!") == [CHARS.index(ch) for ch in "Speak!"]
    ids = meta["tokenizer"].encode(TEXT[:20])
    assert_close(logits_of(model, ids), lecture_logits(w, ids, n_head=4), rtol=0, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# nanoGPT shakespeare_char: ckpt.pt + meta.pkl

def nanogpt_char_checkpoint(*, vocab, n_layer=2, n_head=2, C=16, block=32, seed=2) -> dict:
    g = torch.Generator().manual_seed(seed)
    state = {"transformer.wte.weight": randn(g, vocab, C, std=0.5), "transformer.wpe.weight": randn(g, block, C, std=0.5)}
    for i in range(n_layer):
        p = f"_orig_mod.transformer.h.{i}."
        state[p + "ln_1.weight"], state[p + "ln_2.weight"] = 1 + randn(g, C, std=0.2), 1 + randn(g, C, std=0.2)
        state[p + "attn.c_attn.weight"] = randn(g, 3 * C, C, std=0.5)
        state[p + "attn.c_proj.weight"] = randn(g, C, C, std=0.3)
        state[p + "mlp.c_fc.weight"] = randn(g, 4 * C, C, std=0.5)
        state[p + "mlp.c_proj.weight"] = randn(g, C, 4 * C, std=0.3)
    state["transformer.ln_f.weight"] = 1 + randn(g, C, std=0.2)
    state["lm_head.weight"] = state["transformer.wte.weight"]
    state = {k if k.startswith("_orig_mod.") else "_orig_mod." + k: v for k, v in state.items()}
    args = dict(n_layer=n_layer, n_head=n_head, n_embd=C, block_size=block, bias=False, vocab_size=vocab, dropout=0.2)
    return {"model": state, "model_args": args, "iter_num": 5000, "best_val_loss": torch.tensor(1.47),
            "config": {"dataset": "shakespeare_char"}, "optimizer": {}}


def nanogpt_logits(state: dict, ids: list[int], *, n_head: int) -> torch.Tensor:
    """nanoGPT's GPT.forward with bias=False (exact GELU, tied head)."""
    w = {k.removeprefix("_orig_mod."): v.double() for k, v in state.items()}
    T, C = len(ids), w["transformer.wte.weight"].shape[1]
    hs = C // n_head
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    layers = len({k.split(".")[2] for k in w if k.startswith("transformer.h.")})
    for i in range(layers):
        p = f"transformer.h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], None)
        q, k, v = (h @ w[p + "attn.c_attn.weight"].T).split(C, dim=-1)
        q, k, v = (t.view(T, n_head, hs).transpose(0, 1) for t in (q, k, v))
        y = (causal_softmax(q @ k.transpose(1, 2) / math.sqrt(hs)) @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ w[p + "attn.c_proj.weight"].T
        h = layer_norm(x, w[p + "ln_2.weight"], None) @ w[p + "mlp.c_fc.weight"].T
        x = x + torch.nn.functional.gelu(h) @ w[p + "mlp.c_proj.weight"].T
    return layer_norm(x, w["transformer.ln_f.weight"], None) @ w["transformer.wte.weight"].T


def write_meta_pkl(path, chars):
    """As nanoGPT's data/shakespeare_char/prepare.py writes it."""
    with open(path, "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                     "stoi": {ch: i for i, ch in enumerate(chars)}}, f)


def test_nanogpt_shakespeare_char(tmp_path):
    torch.save(nanogpt_char_checkpoint(vocab=len(CHARS)), tmp_path / "ckpt.pt")
    write_meta_pkl(tmp_path / "meta.pkl", CHARS)
    with pytest.raises(NeedsTokenizer, match="nanoGPT's meta.pkl"):
        load(tmp_path / "ckpt.pt")
    model, meta = load(tmp_path / "ckpt.pt", tokenizer=tmp_path / "meta.pkl")
    assert meta["tokenizer"].name == f"characters of meta.pkl ({V})" and meta["iter_num"] == 5000
    assert model.config.vocab_size == V and not model.config.bias
    ids = meta["tokenizer"].encode(TEXT[:32])
    state = nanogpt_char_checkpoint(vocab=len(CHARS))["model"]
    assert_close(logits_of(model, ids), nanogpt_logits(state, ids, n_head=2), rtol=0, atol=1e-4)


def test_padded_rows_load_and_are_never_offered(tmp_path):
    checkpoint = nanogpt_char_checkpoint(vocab=64)  # a vocabulary of 31 padded to 64 rows
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    write_meta_pkl(tmp_path / "meta.pkl", CHARS)
    model, meta = load(tmp_path / "ckpt.pt", tokenizer=tmp_path / "meta.pkl")
    ids = meta["tokenizer"].encode("Speak, speak!")
    assert logits_of(model, ids).shape == (len(ids), V)
    assert f"token rows {V}-63 (padding, never a token)" in meta["ignored"]
    assert_close(logits_of(model, ids), nanogpt_logits(checkpoint["model"], ids, n_head=2)[:, :V], rtol=0, atol=1e-4)


def test_a_tokenizer_bigger_than_the_model_is_refused(tmp_path):
    torch.save(nanogpt_char_checkpoint(vocab=20), tmp_path / "ckpt.pt")
    write_meta_pkl(tmp_path / "meta.pkl", CHARS)
    with pytest.raises(CheckpointError, match=f"the tokenizer characters of meta.pkl \\({V}\\) has {V} tokens but "
                                              "ckpt.pt has only 20 token rows"):
        load(tmp_path / "ckpt.pt", tokenizer=tmp_path / "meta.pkl")


# ---------------------------------------------------------------------------------------------
# A Hugging Face GPT-2 trained with its own BPE: config.json + model.safetensors + tokenizer.json

def own_bpe(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator([TEXT] * 20, trainer=trainer)
    return tokenizer


def test_hugging_face_gpt2_with_its_own_bpe(tmp_path):
    transformers = pytest.importorskip("transformers")
    bpe = own_bpe(300)
    torch.manual_seed(3)
    config = transformers.GPT2Config(vocab_size=bpe.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=4)
    reference = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    reference.save_pretrained(tmp_path / "mine")
    bpe.save(str(tmp_path / "mine" / "tokenizer.json"))
    model, meta = load(tmp_path / "mine")  # tokenizer.json is found on its own
    tokenizer = meta["tokenizer"]
    assert tokenizer.kind == "huggingface" and tokenizer.vocab_size == model.config.vocab_size == bpe.get_vocab_size()
    text = "Before we proceed,\n hear me <|endoftext|> speak!"
    ids = tokenizer.encode(text)
    assert ids == bpe.encode(text, add_special_tokens=False).ids
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0].double()
    assert_close(logits_of(model, ids), expected, rtol=0, atol=1e-4)
    assert any("tokenizer: tokenizer.json" in line for line in checkpoints.describe(model, meta))
    json.loads((tmp_path / "mine" / "config.json").read_text())


# ---------------------------------------------------------------------------------------------
# The app: every page draws with a character-level model converted into LPOS_CHECKPOINT_DIR

def test_every_page_draws_with_a_character_model(tmp_path, monkeypatch):
    from conftest import app_test

    from lpos.pages import PAGES

    torch.save(lecture_weights(vocab=V, block=64), tmp_path / "lecture.pt")
    (tmp_path / "input.txt").write_text(TEXT)
    shared = tmp_path / "shared"
    assert main(["convert", str(tmp_path / "lecture.pt"), "--out", str(shared / "chars.pt"),
                 "--tokenizer", str(tmp_path / "input.txt")]) == 0
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(shared))
    at = app_test(model="dir:chars.pt", scheme="learned", text="Before we speak, hear me é!")
    chosen = at.session_state["selection"]
    assert chosen.model.tokenizer.kind == "characters" and chosen.dropped == 1  # the "é"
    assert chosen.ids == [CHARS.index(ch) for ch in "Before we speak, hear me !"]
    for declared in PAGES:
        at.switch_page(declared.file).run()
        assert not at.exception, (declared.name, [e.value for e in at.exception])
        assert at.title and at.title[0].value, declared.name
        said = " ".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                        + [e.proto.body for e in [*at.info, *at.warning, *at.success]])
        assert "50,257" not in said and "50257" not in said, (declared.name, said[:800])  # no page assumes GPT-2's size


def test_upload_a_model_with_its_tokenizer(tmp_path):
    from test_upload import FakeUpload

    from lpos.ui import upload

    buffer = tmp_path / "lecture.pt"
    torch.save(lecture_weights(vocab=V), buffer)
    model_file = FakeUpload("lecture.pt", buffer.read_bytes())
    with pytest.raises(NeedsTokenizer, match="give nanoGPT's meta.pkl"):  # the box then asks for it
        upload.load_upload([model_file])
    result = upload.load_upload([model_file, FakeUpload("input.txt", TEXT.encode())])
    assert result.meta["tokenizer"].encode("Speak") == [CHARS.index(ch) for ch in "Speak"]
    assert f"tokenizer: characters of input.txt ({V}), {V} tokens" in result.summary
