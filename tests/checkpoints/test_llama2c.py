"""llama2.c's layouts against the same LlamaForCausalLM reference: ckpt.pt, model.bin v0 and v1.

The reference's weights are written in llama2.c's names and orders, from its documented formats
(train.py's checkpoint dict; export.py's legacy and version-1 files), with the query and key rows
turned back to Meta's adjacent pairs the way Hugging Face's conversion script describes the
opposite turn. lpos loads each file and must give the reference's logits at every position.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from lpos import checkpoints
from lpos.checkpoints import CheckpointError

from test_llama import IDS, characters, lpos_logits, reference_llama, reference_logits

pytest.importorskip("transformers")
MAX_SEQ_LEN = 64
VOCAB_FOR_SP = 64  # the reference's vocabulary, so a SentencePiece model of this size fits it


def meta_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Hugging Face's q/k rows back in Meta's (llama2.c's) order: HF's conversion maps Meta's rows
    with view(n_heads, hs/2, 2, C).transpose(1, 2); this undoes it."""
    rows, width = weight.shape
    return weight.view(n_heads, 2, rows // n_heads // 2, width).transpose(1, 2).reshape(rows, width)


def llama2c_weights(reference) -> tuple[dict, dict]:
    """The reference's weights under llama2.c's names, and its model_args."""
    c, hf = reference.config, {k: v.detach().clone() for k, v in reference.state_dict().items()}
    weights = {"tok_embeddings.weight": hf["model.embed_tokens.weight"], "norm.weight": hf["model.norm.weight"],
               "output.weight": hf.get("lm_head.weight", hf["model.embed_tokens.weight"])}
    for i in range(c.num_hidden_layers):
        theirs, ours = f"model.layers.{i}.", f"layers.{i}."
        weights |= {
            ours + "attention.wq.weight": meta_rows(hf[theirs + "self_attn.q_proj.weight"], c.num_attention_heads),
            ours + "attention.wk.weight": meta_rows(hf[theirs + "self_attn.k_proj.weight"], c.num_key_value_heads),
            ours + "attention.wv.weight": hf[theirs + "self_attn.v_proj.weight"],
            ours + "attention.wo.weight": hf[theirs + "self_attn.o_proj.weight"],
            ours + "feed_forward.w1.weight": hf[theirs + "mlp.gate_proj.weight"],
            ours + "feed_forward.w2.weight": hf[theirs + "mlp.down_proj.weight"],
            ours + "feed_forward.w3.weight": hf[theirs + "mlp.up_proj.weight"],
            ours + "attention_norm.weight": hf[theirs + "input_layernorm.weight"],
            ours + "ffn_norm.weight": hf[theirs + "post_attention_layernorm.weight"],
        }
    args = dict(dim=c.hidden_size, n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads,
                n_kv_heads=c.num_key_value_heads, vocab_size=c.vocab_size, multiple_of=16,
                max_seq_len=MAX_SEQ_LEN, dropout=0.0)
    return weights, args


def write_floats(f, tensor: torch.Tensor) -> None:
    f.write(tensor.detach().float().numpy().astype("<f4").tobytes())


def write_model_bin(path, weights: dict, args: dict, *, version: int, shared: bool) -> None:
    L, hs = args["n_layers"], args["dim"] // args["n_heads"]
    hidden = weights["layers.0.feed_forward.w1.weight"].shape[0]
    layer = lambda part: [weights[f"layers.{i}.{part}"] for i in range(L)]  # noqa: E731
    with open(path, "wb") as f:
        if version == 1:
            f.write(struct.pack("<Ii", 0x616B3432, 1))
            f.write(struct.pack("<7i", args["dim"], hidden, L, args["n_heads"], args["n_kv_heads"],
                                args["vocab_size"], args["max_seq_len"]))
            f.write(struct.pack("<B", int(shared)))
            f.write(b"\0" * (256 - f.tell()))
            order = [*layer("attention_norm.weight"), *layer("ffn_norm.weight"), weights["norm.weight"],
                     weights["tok_embeddings.weight"], *layer("attention.wq.weight"), *layer("attention.wk.weight"),
                     *layer("attention.wv.weight"), *layer("attention.wo.weight"), *layer("feed_forward.w1.weight"),
                     *layer("feed_forward.w2.weight"), *layer("feed_forward.w3.weight")]
        else:
            vocab = args["vocab_size"] if shared else -args["vocab_size"]
            f.write(struct.pack("<7i", args["dim"], hidden, L, args["n_heads"], args["n_kv_heads"], vocab,
                                args["max_seq_len"]))
            angles = torch.outer(torch.arange(args["max_seq_len"]).float(),
                                 1.0 / 10000.0 ** (torch.arange(0, hs, 2).float() / hs))  # (max_seq_len, hs/2)
            order = [weights["tok_embeddings.weight"], *layer("attention_norm.weight"), *layer("attention.wq.weight"),
                     *layer("attention.wk.weight"), *layer("attention.wv.weight"), *layer("attention.wo.weight"),
                     *layer("ffn_norm.weight"), *layer("feed_forward.w1.weight"), *layer("feed_forward.w2.weight"),
                     *layer("feed_forward.w3.weight"), weights["norm.weight"], angles.cos(), angles.sin()]
        if not shared:
            order.append(weights["output.weight"])
        for tensor in order:
            write_floats(f, tensor)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("kv_heads,tied", [(4, True), (2, False)])
def test_model_bin_gives_the_reference_logits(tmp_path, version, kv_heads, tied):
    reference = reference_llama(kv_heads=kv_heads, tied=tied, seed=5)
    weights, args = llama2c_weights(reference)
    write_model_bin(tmp_path / "model.bin", weights, args, version=version, shared=tied)
    model, meta = checkpoints.load(tmp_path / "model.bin", tokenizer=characters())
    assert f"version {version}" in meta["source"] and model.config.tied == tied
    assert model.config.block_size == MAX_SEQ_LEN and model.config.n_kv_head == kv_heads
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kv_heads,tied", [(4, True), (1, False)])
def test_ckpt_pt_gives_the_reference_logits_and_drops_the_optimizer(tmp_path, kv_heads, tied):
    reference = reference_llama(kv_heads=kv_heads, tied=tied, seed=6)
    weights, args = llama2c_weights(reference)
    state = {"_orig_mod." + k: v for k, v in weights.items()}  # as torch.compile saves it
    optimizer = {"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": [{"lr": 5e-4}]}
    torch.save({"model": state, "optimizer": optimizer, "model_args": args, "iter_num": 2000,
                "best_val_loss": 1.25, "config": {"batch_size": 8, "dataset": "tinystories"}}, tmp_path / "ckpt.pt")
    model, meta = checkpoints.load(tmp_path / "ckpt.pt", tokenizer=characters())
    assert meta["source"].startswith("llama2.c ckpt.pt") and meta["iter_num"] == 2000
    assert "optimizer" in meta["ignored"] and model.config.tied == tied
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_tokenizer_model_beside_a_model_bin_is_found(tmp_path):
    sentencepiece = pytest.importorskip("sentencepiece")
    text = tmp_path / "text.txt"
    text.write_text("Once upon a time there was a little girl named Lily who liked to play.\n" * 40)
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "tokenizer"),
                                             vocab_size=VOCAB_FOR_SP, model_type="bpe")
    reference = reference_llama(seed=7)
    weights, args = llama2c_weights(reference)
    write_model_bin(tmp_path / "model.bin", weights, args, version=1, shared=False)
    model, meta = checkpoints.load(tmp_path / "model.bin")
    assert meta["tokenizer"].vocab_size == VOCAB_FOR_SP == model.config.vocab_size


def test_a_header_promising_more_than_the_file_holds_is_refused(tmp_path):
    weights, args = llama2c_weights(reference_llama(seed=8))
    write_model_bin(tmp_path / "model.bin", weights, args, version=1, shared=True)
    data = (tmp_path / "model.bin").read_bytes()
    (tmp_path / "model.bin").write_bytes(data[:-4])
    with pytest.raises(CheckpointError, match="but the file holds"):
        checkpoints.load(tmp_path / "model.bin", tokenizer=characters())


def test_magic_with_an_unknown_version_is_named(tmp_path):
    (tmp_path / "model.bin").write_bytes(struct.pack("<Ii", 0x616B3432, 2) + b"\0" * 300)
    with pytest.raises(CheckpointError, match="version 2"):
        checkpoints.load(tmp_path / "model.bin")


def test_model_bin_is_never_unpickled(tmp_path):
    header = np.array([32, 48, 2, 4, 4, 64, 64], dtype="<i4").tobytes()
    (tmp_path / "model.bin").write_bytes(header + b"\x80\x04cos\nsystem\n")
    with pytest.raises(CheckpointError, match="header describes"):
        checkpoints.load(tmp_path / "model.bin")


def test_convert_writes_a_llama_with_its_tokenizer_and_logits(tmp_path, capsys):
    from lpos.cli import main

    sentencepiece = pytest.importorskip("sentencepiece")
    text = tmp_path / "text.txt"
    text.write_text("One day a small dog found a red ball in the garden and ran home.\n" * 40)
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "tokenizer"),
                                             vocab_size=VOCAB_FOR_SP, model_type="bpe")
    reference = reference_llama(kv_heads=2, tied=True, seed=9)
    weights, args = llama2c_weights(reference)
    write_model_bin(tmp_path / "stories.bin", weights, args, version=0, shared=True)
    assert main(["convert", str(tmp_path / "stories.bin"), "--out", str(tmp_path / "stories.pt")]) == 0
    assert "llama2.c model.bin, version 0" in capsys.readouterr().out
    model, meta = checkpoints.load(tmp_path / "stories.pt")
    assert meta["tokenizer"].vocab_size == VOCAB_FOR_SP and meta["training_length"] == MAX_SEQ_LEN
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_tokenizer_model_beside_a_ckpt_pt_is_found(tmp_path):
    sentencepiece = pytest.importorskip("sentencepiece")
    text = tmp_path / "text.txt"
    text.write_text("The cat sat on the warm mat and looked at the birds in the tree.\n" * 40)
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "tokenizer"),
                                             vocab_size=VOCAB_FOR_SP, model_type="bpe")
    reference = reference_llama(kv_heads=2, tied=False, seed=10)
    weights, args = llama2c_weights(reference)
    torch.save({"model": weights, "model_args": args, "iter_num": 10}, tmp_path / "ckpt.pt")
    model, meta = checkpoints.load(tmp_path / "ckpt.pt")
    assert meta["tokenizer"].vocab_size == VOCAB_FOR_SP == model.config.vocab_size
    (tmp_path / "tokenizer.model").unlink()
    with pytest.raises(CheckpointError, match="tokenizer"):  # the same file alone: its vocabulary is not GPT-2's
        checkpoints.load(tmp_path / "ckpt.pt")


def test_a_model_bin_in_the_shared_folder_is_offered(tmp_path, monkeypatch):
    from lpos.ui.models import label, offered, shared_dir_files

    weights, args = llama2c_weights(reference_llama(seed=11))
    write_model_bin(tmp_path / "stories.bin", weights, args, version=0, shared=True)
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))
    assert shared_dir_files() == {"dir:stories.bin": tmp_path / "stories.bin"}
    assert "dir:stories.bin" in offered() and label("dir:stories.bin") == "stories.bin (shared folder)"
