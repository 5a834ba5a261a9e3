"""Llama-family models against Hugging Face's LlamaForCausalLM: the same logits at every position.

Each test builds a small LlamaForCausalLM with random weights (grouped-query or not, tied or
untied, saved in float32 or bfloat16, in one file or in shards), saves it with save_pretrained,
loads the folder with lpos and compares logits (1e-4). The Llama block itself: RMSNorm against
its formula, a shift of every position leaves a RoPE model's logits unchanged, the defaults
build GPT-2's block, an older config's llama3 or dynamic rope_scaling gives the reference's logits, and a
rope_scaling lpos cannot reproduce is refused by name.
"""
from __future__ import annotations

import copy
import json

import pytest
import torch

from lpos import checkpoints
from lpos.checkpoints import CheckpointError
from lpos.layers import RMSNorm
from lpos.model import GPT, GPTConfig
from lpos.tokenizer import CharacterTokenizer

transformers = pytest.importorskip("transformers")

VOCAB = 64


def characters(vocab: int = VOCAB) -> CharacterTokenizer:
    """A character tokenizer of exactly `vocab` tokens, so no row of the model is dropped."""
    return CharacterTokenizer([chr(33 + i) for i in range(vocab)], source="test")


def reference_llama(*, kv_heads: int = 4, tied: bool = False, seed: int = 0, rope_theta: float = 10000.0,
                    layers: int = 2, dtype: torch.dtype = torch.float32, max_positions: int = 64,
                    rope_scaling: dict | None = None):
    """A LlamaForCausalLM (width 32, 4 heads, hidden 48) with weights large enough for logits that
    differ by whole units, rounded to `dtype` (so the float32 reference equals what the file holds)."""
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=kv_heads,
                                      max_position_embeddings=max_positions, rms_norm_eps=1e-5, rope_theta=rope_theta,
                                      rope_scaling=rope_scaling, tie_word_embeddings=tied, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            value = 1 + 0.2 * torch.randn_like(p) if name.endswith("norm.weight") else 0.3 * torch.randn_like(p)
            p.copy_(value.to(dtype).float())
    return model


def reference_logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits  # (B, T, V)


def lpos_logits(model: GPT, ids: torch.Tensor, **options) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, **options)[0]  # (B, T, V)


IDS = torch.randint(0, VOCAB, (2, 24), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("kv_heads,tied", [(4, False), (2, False), (1, True), (2, True)])
def test_hugging_face_folder_gives_the_reference_logits(tmp_path, kv_heads, tied):
    reference = reference_llama(kv_heads=kv_heads, tied=tied, rope_theta=500.0)
    reference.save_pretrained(tmp_path)
    model, meta = checkpoints.load(tmp_path, tokenizer=characters())
    c = model.config
    assert (c.norm, c.mlp, c.position, c.n_kv_head, c.tied, c.rope_base, c.bias) == \
        ("rmsnorm", "swiglu", "rope", kv_heads, tied, 500.0, False)
    assert "Hugging Face Llama" in meta["source"]
    assert not any(p.is_meta for p in model.parameters())  # every weight came from the file
    assert (model.lm_head.weight is model.transformer.wte.weight) == tied  # tied: one parameter, held once
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_bfloat16_and_sharded_files_held_as_stored_or_read_into_float32(tmp_path):
    reference = reference_llama(kv_heads=2, dtype=torch.bfloat16, seed=3)
    copy.deepcopy(reference).to(torch.bfloat16).save_pretrained(tmp_path, max_shard_size="10KB")
    assert (tmp_path / "model.safetensors.index.json").is_file() and not (tmp_path / "model.safetensors").exists()
    model, meta = checkpoints.load(tmp_path, tokenizer=characters(), float32=True)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)
    held, _ = checkpoints.load(tmp_path, tokenizer=characters())  # as stored: the blocks' matrices in bfloat16
    assert held.transformer.h[0].attn.c_attn.weight.dtype == torch.bfloat16
    assert held.transformer.wte.weight.dtype == torch.float32
    torch.testing.assert_close(lpos_logits(held, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_float16_file(tmp_path):
    reference = reference_llama(kv_heads=4, tied=True, dtype=torch.float16, seed=4)
    copy.deepcopy(reference).to(torch.float16).save_pretrained(tmp_path)
    model, _ = checkpoints.load(tmp_path, tokenizer=characters())
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_attention_weights_come_back_one_per_query_head(tmp_path):
    reference = reference_llama(kv_heads=2)
    reference.save_pretrained(tmp_path)
    model, _ = checkpoints.load(tmp_path, tokenizer=characters())
    with torch.no_grad():
        ours = model(IDS, return_attention=True)[2]
        theirs = reference(input_ids=IDS, output_attentions=True).attentions
    assert len(ours) == 2 and ours[0].shape == (2, 4, 24, 24)
    for mine, hf in zip(ours, theirs):
        torch.testing.assert_close(mine, hf, atol=1e-5, rtol=1e-4)
    assert [model.transformer.h[0].attn.key_head(h) for h in range(4)] == [0, 0, 1, 1]


def test_a_shift_of_every_position_leaves_the_logits_unchanged(tmp_path):
    reference_llama(kv_heads=2).save_pretrained(tmp_path)
    model, _ = checkpoints.load(tmp_path, tokenizer=characters())
    plain = lpos_logits(model, IDS)
    for offset in (1, 17, 300):
        torch.testing.assert_close(lpos_logits(model, IDS, offset=offset), plain, atol=1e-4, rtol=1e-4)
    assert model.max_input_length is None  # RoPE runs past max_position_embeddings


def test_rmsnorm_is_its_formula():
    norm = RMSNorm(8, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    x = torch.randn(3, 8, dtype=torch.float64).float()
    expected = x / torch.sqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-5).float() * norm.weight
    torch.testing.assert_close(norm(x), expected)


def test_defaults_build_gpt2s_block():
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=8, vocab_size=10))
    names = set(model.state_dict())
    assert "transformer.h.0.mlp.c_fc.weight" in names and "transformer.h.0.ln_1.bias" in names
    assert model.transformer.h[0].attn.c_attn.weight.shape == (24, 8)


def test_gqa_config_checks():
    with pytest.raises(ValueError, match="must divide n_head"):
        GPTConfig(n_head=4, n_kv_head=3)
    with pytest.raises(ValueError, match="unknown norm"):
        GPTConfig(norm="batchnorm")


@pytest.mark.parametrize("scaling", [
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8},
    {"type": "dynamic", "factor": 2.0},
])
def test_an_older_config_s_rope_scaling_gives_the_reference_logits(tmp_path, scaling):
    reference = reference_llama(rope_theta=500.0, max_positions=16, rope_scaling=scaling)
    reference.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_scaling"], config["rope_theta"] = scaling, 500.0
    (tmp_path / "config.json").write_text(json.dumps(config))
    model, _ = checkpoints.load(tmp_path, tokenizer=characters())
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_rope_scaling_lpos_cannot_reproduce_is_refused_by_name(tmp_path):
    reference_llama().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_scaling"], config["rope_theta"] = {"rope_type": "longrope", "factor": 2.0}, 10000.0
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="rope_type 'longrope', which lpos does not reproduce"):
        checkpoints.load(tmp_path, tokenizer=characters())


def test_older_config_with_rope_theta_and_no_scaling_loads(tmp_path):
    reference = reference_llama(rope_theta=2000.0)
    reference.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("rope_parameters", None)
    config.update(rope_theta=2000.0, rope_scaling=None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    model, _ = checkpoints.load(tmp_path, tokenizer=characters())
    torch.testing.assert_close(lpos_logits(model, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


def test_converted_llama_keeps_its_logits_and_tokenizer(tmp_path):
    reference = reference_llama(kv_heads=2)
    reference.save_pretrained(tmp_path / "hf")
    model, meta = checkpoints.load(tmp_path / "hf", tokenizer=characters())
    checkpoints.save(model, meta, tmp_path / "llama.pt")
    again, again_meta = checkpoints.load(tmp_path / "llama.pt")
    assert again.config == model.config and again_meta["tokenizer"].vocab_size == VOCAB
    torch.testing.assert_close(lpos_logits(again, IDS), reference_logits(reference, IDS), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_every_page_runs_with_a_grouped_query_llama_from_the_shared_folder(tmp_path, monkeypatch):
    """A 6-layer Llama with 2 key heads for 8 query heads, converted into LPOS_CHECKPOINT_DIR: every page draws
    with it, and says what it is (no position rows, its own RoPE base and training length). It speaks GPT-2's
    50,257 tokens, so the pages' own texts read the same; other vocabularies are the tokenizer's work
    (tests/tokenizer)."""
    from conftest import app_test

    from lpos.pages import PAGES

    config = transformers.LlamaConfig(vocab_size=50257, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
                                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
                                      rope_theta=50000.0, tie_word_embeddings=True)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "hf")
    model, meta = checkpoints.load(tmp_path / "hf")
    (tmp_path / "shared").mkdir()
    checkpoints.save(model, meta, tmp_path / "shared" / "llama.pt")
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path / "shared"))
    at = app_test(model="dir:llama.pt", text="one two three four five six seven eight nine")
    assert not at.exception
    said = {}
    for declared in PAGES:
        at.switch_page(declared.file).run()
        assert not at.exception, (declared.name, [e.message for e in at.exception])
        said[declared.name] = " ".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                                       + [e.proto.body for e in [*at.info, *at.warning, *at.success]])
    assert "2 key heads for its 8 query heads" in said["attention"]
    assert f"{50000.0 ** (-2 / 8):.2f}× the speed" in said["attention"]
    assert "RoPE adds no position rows: it rotates queries and keys by their position inside attention" in said["embeddings"]
    assert "llama.pt (shared folder) was trained on 256-token windows (RoPE base 50,000)" in said["stretch"]
    assert "Sections 1 to 3 rescale **llama.pt (shared folder)**" in said["stretch"]
    assert "base 50,000, this model's" in said["similarity"]
