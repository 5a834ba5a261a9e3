"""One small model of each Hugging Face family lpos reads (Qwen2, Qwen3, GPT-NeoX, SmolLM3, Gemma 3), built with
transformers at random and saved as its folder: shared by the families' logit tests and the browser walk."""
from __future__ import annotations

import torch
import transformers

NO_SPECIAL_IDS = dict(pad_token_id=None, bos_token_id=None, eos_token_id=None)  # defaults past a 64-token vocabulary


def spread(model, *, seed: int = 0, dtype: torch.dtype = torch.float32):
    """Weights large enough for logits that differ by whole units (norm weights near 1, or near 0 for Gemma's
    1 + weight), rounded to `dtype` so the float32 reference holds what the file holds."""
    generator = torch.Generator().manual_seed(seed)
    gemma = "Gemma3" in type(model).__name__
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            value = (0.2 if gemma else 1.0) + 0.2 * noise if name.endswith("norm.weight") else 0.3 * noise
            p.copy_(value.to(dtype).float())
    return model.eval()


PRACTICE = {  # each family's folder name -> what its Positions in attention page says of the model built below
    "qwen2": "Every one of the 8 pairs of each head turns",
    "qwen3": "Every one of the 4 pairs of each head turns",
    "pythia": "Only the first 4 of each head's 16 columns turn",
    "smollm3": "Layer 4 rotates nothing",
    "gemma3": "3 local layers see the last 8 positions and turn with base 10,000; layer 4 is global: every position, "
              "base 1,000,000",
}


def gpt2_vocabulary_folders(folder) -> None:
    """One small model of each family with GPT-2's 50,257 tokens (so the pages' own texts read the same), saved
    as Hugging Face folders in `folder`, named as PRACTICE names them."""
    shape = dict(vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=2,
                 max_position_embeddings=128)
    models = {
        "qwen2": transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape, num_key_value_heads=1, rope_theta=1e6)),
        "qwen3": transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**shape, num_key_value_heads=1, head_dim=8)),
        "pythia": transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**shape, rotary_pct=0.25)),
        "smollm3": transformers.SmolLM3ForCausalLM(transformers.SmolLM3Config(**shape, **NO_SPECIAL_IDS,
                                                                             num_key_value_heads=1)),
        "gemma3": transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(
            **shape, num_key_value_heads=1, head_dim=16, sliding_window=8, pad_token_id=0,
            layer_types=["sliding_attention"] * 3 + ["full_attention"])),
    }
    assert set(models) == set(PRACTICE)
    for name, model in models.items():
        spread(model).save_pretrained(folder / name)
