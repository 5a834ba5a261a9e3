"""Hugging Face folders of Qwen2, Qwen3, GPT-NeoX, SmolLM3 and Gemma 3 against transformers' own classes.

Each test builds a small random model with transformers (three or four layers, width 32) with its family's
position practice switched on (partial rotary, q/k norms, q/k/v biases, layers without RoPE, sliding-window and
global layers with two bases, a yarn, llama3, linear or dynamic rescaling), saves it with save_pretrained and a
tokenizer.json, opens the folder with `lpos.checkpoints.load` and compares the logits at every position (at most
1e-4 apart). Each setting is shown to matter: the same weights without it give other logits. Settings lpos does
not reproduce are refused by name.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch

from family_folders import NO_SPECIAL_IDS, spread
from lpos import checkpoints
from lpos.checkpoints import CheckpointError
from lpos.checkpoints.families import trained_scaling_sentence
from lpos.kv_cache import KVCache
from lpos.model import GPT
from lpos.positions import RopeScaling

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

VOCAB = 64
CHARACTERS = [chr(33 + i) for i in range(VOCAB)]  # "!" to "`": one token each
TEXT = "".join(CHARACTERS[(7 * i + 3) % VOCAB] for i in range(24))  # 24 tokens: past every window and length below
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_attention_heads=4,
             attn_implementation="eager")


def save_tokenizer(folder) -> None:
    """A tokenizer.json of the 64 characters, no merges: token i is CHARACTERS[i]."""
    model = tokenizers.models.BPE(vocab={c: i for i, c in enumerate(CHARACTERS)}, merges=[])
    tokenizers.Tokenizer(model).save(str(folder / "tokenizer.json"))


def opened(reference, folder, *, dtype: torch.dtype = torch.float32, **save) -> GPT:
    """`reference` saved (in `dtype`) with a tokenizer.json, opened by lpos with the folder's own tokenizer."""
    copy.deepcopy(reference).to(dtype).save_pretrained(folder, **save)
    save_tokenizer(folder)
    model, meta = checkpoints.load(folder)
    assert meta["tokenizer"].vocab_size == VOCAB and not any(p.is_meta for p in model.parameters())
    return model


def logits(model, ids: torch.Tensor, **options) -> torch.Tensor:
    with torch.no_grad():
        if isinstance(model, GPT):
            return model(ids, **options)[0]
        return model(input_ids=ids).logits  # (B, T, V)


def assert_same_logits(model: GPT, reference, ids: torch.Tensor) -> torch.Tensor:
    ours = logits(model, ids)
    torch.testing.assert_close(ours, logits(reference, ids), atol=1e-4, rtol=0)
    return ours


def assert_it_matters(model: GPT, ids: torch.Tensor, **changes) -> None:
    """The same weights in a model without the setting give logits more than 1e-3 apart."""
    other = GPT.empty(dataclasses.replace(model.config, **changes))
    other.load_state_dict(model.state_dict())
    assert (logits(other.eval(), ids) - logits(model, ids)).abs().max() > 1e-3, changes


def load_folder(reference, tmp_path, **options):
    model = opened(reference, tmp_path / "model", **options)
    tokenizer = checkpoints.load(tmp_path / "model")[1]["tokenizer"]
    ids = torch.tensor([tokenizer.encode(TEXT)])
    assert ids.tolist() == [[CHARACTERS.index(c) for c in TEXT]]
    return model, ids


def test_qwen2_biases_base_sliding_window_and_yarn(tmp_path):
    config = transformers.Qwen2Config(**SMALL, num_hidden_layers=3, num_key_value_heads=2, max_position_embeddings=64,
                                      rope_theta=1_000_000.0, use_sliding_window=True, sliding_window=5,
                                      max_window_layers=1,
                                      rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})
    reference = spread(transformers.Qwen2ForCausalLM(config))
    model, ids = load_folder(reference, tmp_path)
    c = model.config
    assert (c.qkv_bias, c.bias, c.rope_base, c.sliding_windows, c.n_kv_head) == (True, False, 1e6, (0, 5, 5), 2)
    assert [s.method for s in c.layer_scalings] == ["yarn"] * 3 and c.layer_scalings[0].original_length == 16
    assert "already rescales its rotations, as it was trained: YaRN ×4 from 16 positions." in trained_scaling_sentence(c)
    assert_same_logits(model, reference, ids)
    assert_it_matters(model, ids, sliding_windows=())
    assert_it_matters(model, ids, layer_scalings=())


def test_qwen3_query_key_norms_own_head_size_and_llama3_scaling(tmp_path):
    config = transformers.Qwen3Config(**SMALL, num_hidden_layers=3, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=64, tie_word_embeddings=True,
                                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8})
    reference = spread(transformers.Qwen3ForCausalLM(config))
    model, ids = load_folder(reference, tmp_path)
    c = model.config
    assert (c.qk_norm, c.head_size, c.tied, c.layer_scalings[0].method) == (True, 16, True, "llama3")
    assert model.transformer.h[0].attn.c_attn.weight.shape == (4 * 16 + 2 * 2 * 16, 32)
    assert_same_logits(model, reference, ids)
    assert_it_matters(model, ids, layer_scalings=())


@pytest.mark.parametrize("parallel,share", [(True, 0.25), (False, 0.5)])
def test_gpt_neox_partial_rotary_parallel_block_untied_head_and_dynamic_scaling(tmp_path, parallel, share):
    config = transformers.GPTNeoXConfig(**{**SMALL, "num_attention_heads": 2}, num_hidden_layers=3,  # heads of 16
                                        max_position_embeddings=16, rotary_pct=share,
                                        use_parallel_residual=parallel, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    reference = spread(transformers.GPTNeoXForCausalLM(config))
    model, ids = load_folder(reference, tmp_path)
    c = model.config
    assert (c.position, c.rope_share, c.parallel_block, c.tied, c.dynamic_factor) == \
        ("rope-partial", share, parallel, False, 2.0)
    frequencies = model.scheme.head_frequencies(16, None, c.rope_base)  # a head of 16 columns: 8 pairs
    assert (frequencies > 0).sum() == int(16 * share) // 2  # the pairs past the rotated share never turn
    assert_same_logits(model, reference, ids)  # 24 tokens: dynamic NTK has grown the base past 16
    assert_it_matters(model, ids, dynamic_factor=None)
    assert_it_matters(model, ids, parallel_block=not parallel)


def test_smollm3_layers_without_rope_and_linear_scaling(tmp_path):
    config = transformers.SmolLM3Config(**SMALL, **NO_SPECIAL_IDS, num_hidden_layers=4, num_key_value_heads=2,
                                        max_position_embeddings=64, no_rope_layer_interval=2,
                                        rope_scaling={"rope_type": "linear", "factor": 2.0})
    reference = spread(transformers.SmolLM3ForCausalLM(config))
    model, ids = load_folder(reference, tmp_path)
    assert (model.config.position, model.config.nope_layers) == ("rnope", (1, 3))
    assert [model.scheme.rotates_layer(i) for i in range(4)] == [True, False, True, False]
    assert_same_logits(model, reference, ids)
    assert_it_matters(model, ids, nope_layers=(3,))


GEMMA_LAYERS = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]


def gemma_text_config(**extra):
    return transformers.Gemma3TextConfig(
        **SMALL, num_hidden_layers=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=12, sliding_window=5,
        max_position_embeddings=64, pad_token_id=0, layer_types=GEMMA_LAYERS,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1_000_000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}, **extra)


def test_gemma3_local_and_global_layers_norms_and_scaled_embeddings(tmp_path):
    reference = spread(transformers.Gemma3ForCausalLM(gemma_text_config()))
    model, ids = load_folder(reference, tmp_path)
    c = model.config
    assert (c.layer_bases, c.sliding_windows) == ((1e4, 1e4, 1e6, 1e4), (5, 5, 0, 5))
    assert [s and s.method for s in c.layer_scalings] == [None, None, "pi", None]
    assert (c.qk_norm, c.sandwich_norm, c.mlp, c.embed_scale, c.query_scale) == (True, True, "geglu", 32 ** 0.5, 12 ** -0.5)
    assert [block.attn.rope_base for block in model.transformer.h] == [1e4, 1e4, 1e6, 1e4]
    assert_same_logits(model, reference, ids)
    assert_it_matters(model, ids, layer_bases=())
    assert_it_matters(model, ids, sliding_windows=())
    assert_it_matters(model, ids, embed_scale=1.0)
    said = "\n".join(checkpoints.describe(model, checkpoints.load(tmp_path / "model")[1]))
    assert ("3 local layers see the last 5 positions and turn with base 10,000; layer 3 is global: every position, "
            "base 1,000,000; trained with Position Interpolation ×4 from 64 positions in layer 3") in said
    assert "token rows scaled by 5.66 (the square root of the width)" in said


def test_rescaling_at_inference_replaces_the_trained_one_and_as_trained_keeps_it(tmp_path):
    config = transformers.Qwen2Config(**SMALL, num_hidden_layers=2, num_key_value_heads=2, max_position_embeddings=64,
                                      rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})
    reference = spread(transformers.Qwen2ForCausalLM(config))
    model, ids = load_folder(reference, tmp_path)
    own = assert_same_logits(model, reference, ids)
    torch.testing.assert_close(logits(model, ids, rope_scaling=RopeScaling("as-trained", 1.0)), own, atol=0, rtol=0)
    by_pi = logits(model, ids, rope_scaling=RopeScaling("pi", 2.0, 16))
    plain = GPT.empty(dataclasses.replace(model.config, layer_scalings=()))
    plain.load_state_dict(model.state_dict())
    torch.testing.assert_close(by_pi, logits(plain.eval(), ids, rope_scaling=RopeScaling("pi", 2.0, 16)), atol=0, rtol=0)


def test_gemma3_multimodal_folder_opens_its_text_model(tmp_path):
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    config = transformers.Gemma3Config(text_config=gemma_text_config().to_dict(), vision_config=vision,
                                       mm_tokens_per_image=4, image_token_index=VOCAB - 1, boi_token_index=VOCAB - 2,
                                       eoi_token_index=VOCAB - 3)
    reference = spread(transformers.Gemma3ForConditionalGeneration(config))
    model, ids = load_folder(reference, tmp_path)
    assert model.config.layer_bases == (1e4, 1e4, 1e6, 1e4)
    assert_same_logits(model, reference, ids)


def test_bfloat16_shards_held_as_stored_and_a_cache_that_continues_across_the_window(tmp_path):
    reference = spread(transformers.Gemma3ForCausalLM(gemma_text_config()), dtype=torch.bfloat16, seed=3)
    held = opened(reference, tmp_path / "model", dtype=torch.bfloat16, max_shard_size="20KB")
    assert (tmp_path / "model" / "model.safetensors.index.json").is_file()
    block = held.transformer.h[0]
    assert block.attn.c_attn.weight.dtype == block.mlp.w1.weight.dtype == torch.bfloat16  # half the memory
    assert block.ln_1.weight.dtype == held.transformer.wte.weight.dtype == torch.float32
    ids = torch.tensor([[CHARACTERS.index(c) for c in TEXT]])
    assert logits(held, ids).dtype == torch.float32
    model, _ = checkpoints.load(tmp_path / "model", float32=True)  # the learner asks for float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    whole = assert_same_logits(model, reference, ids)
    torch.testing.assert_close(logits(held, ids), whole, atol=1e-4, rtol=0)  # bfloat16 weights, float32 sums
    cache = KVCache(model.config.n_layer)
    steps = [logits(model, ids[:, :10], cache=cache)] + [logits(model, ids[:, t:t + 1], cache=cache) for t in range(10, 24)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-4, rtol=0)


def test_a_converted_family_model_keeps_its_settings_in_the_lpos_format(tmp_path):
    reference = spread(transformers.Gemma3ForCausalLM(gemma_text_config()))
    model, ids = load_folder(reference, tmp_path)
    checkpoints.save(model, checkpoints.load(tmp_path / "model")[1], tmp_path / "gemma.pt")
    again, meta = checkpoints.load(tmp_path / "gemma.pt")  # the file carries the folder's tokenizer
    assert again.config == model.config and meta["tokenizer"].vocab_size == VOCAB
    torch.testing.assert_close(logits(again, ids), logits(model, ids), atol=0, rtol=0)


def edited(reference, folder, change) -> None:
    """`reference` saved with a tokenizer.json, its config.json then changed by `change(dict)`."""
    reference.save_pretrained(folder)
    save_tokenizer(folder)
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))


def small_qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SMALL, num_hidden_layers=1, max_position_embeddings=64))


def set_rope(**rope):
    return lambda config: config["rope_parameters"].update(rope)


@pytest.mark.parametrize("build,change,message", [
    (small_qwen2, set_rope(rope_type="longrope", factor=2.0), "rope_type 'longrope', which lpos does not reproduce"),
    (small_qwen2, set_rope(rope_type="yarn", factor=4.0, beta_fast=16), "sets beta_fast"),
    (small_qwen2, set_rope(rope_type="yarn", factor=4.0, mscale=0.7, mscale_all_dim=0.7), "sets mscale, mscale_all_dim"),
    (small_qwen2, set_rope(rope_type="linear", factor=0.5), "factor 0.5, not a number of 1 or more"),
    (small_qwen2, set_rope(partial_rotary_factor=0.5), "partial_rotary_factor 0.5"),
    (small_qwen2, lambda c: c.update(hidden_act="gelu"), "hidden_act 'gelu'"),
    (small_qwen2, lambda c: c.update(model_type="mistral"), "model_type 'mistral' is not supported"),
    (lambda: transformers.Gemma3ForCausalLM(gemma_text_config(final_logit_softcapping=30.0)), lambda c: None,
     "sets final_logit_softcapping"),
    (lambda: transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**SMALL, num_hidden_layers=1)),
     lambda c: c.update(attention_bias=False), "no attention biases"),
])
def test_a_setting_lpos_does_not_reproduce_is_refused_by_name(tmp_path, build, change, message):
    edited(build(), tmp_path / "model", change)
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        checkpoints.load(tmp_path / "model")
