"""Peak memory of loading a SmolLM2-135M-shaped Llama (random weights), in a process that imports
what the server imports, so the figure is what a server pays to open such a model.

Setup (not measured): a folder with config.json and model.safetensors of SmolLM2-135M's shape
(30 layers, width 576, 9 heads, 3 key/value heads, hidden 1,536, vocabulary 49,152, tied), in
bfloat16 as it ships; with --format lpos it is converted to an lpos file (what LPOS_CHECKPOINT_DIR
holds). Then a fresh process imports streamlit, pandas, plotly and lpos, notes its RSS, loads the
model and prints its peak RSS (ru_maxrss) over that baseline, against the float32 weights' size;
then builds the four other schemes' untrained comparison models the scheme-comparing pages use
(Inside, Order blindness, Stretching) and prints the RSS with them.

Run: python load/llama_memory.py                  (Hugging Face folder, bfloat16)
     python load/llama_memory.py --format lpos    (the converted lpos file)
     python load/llama_memory.py --layers 2       (a smoke run)
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3, vocab_size=49152)


def characters(vocab: int):
    """A character tokenizer of exactly `vocab` tokens (plane 2's code points), so every row is used."""
    from lpos.tokenizer import CharacterTokenizer

    return CharacterTokenizer([chr(0x20000 + i) for i in range(vocab)], source="llama_memory")


def build_folder(folder: Path, *, layers: int) -> None:
    import torch
    from safetensors.torch import save_file

    C, H, V = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["vocab_size"]
    kv = SHAPE["num_key_value_heads"] * C // SHAPE["num_attention_heads"]
    generator = torch.Generator().manual_seed(0)

    def weight(*shape):
        return (0.02 * torch.randn(*shape, generator=generator)).to(torch.bfloat16)

    tensors = {"model.embed_tokens.weight": weight(V, C), "model.norm.weight": torch.ones(C, dtype=torch.bfloat16)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {p + "self_attn.q_proj.weight": weight(C, C), p + "self_attn.k_proj.weight": weight(kv, C),
                    p + "self_attn.v_proj.weight": weight(kv, C), p + "self_attn.o_proj.weight": weight(C, C),
                    p + "mlp.gate_proj.weight": weight(H, C), p + "mlp.up_proj.weight": weight(H, C),
                    p + "mlp.down_proj.weight": weight(C, H), p + "input_layernorm.weight": torch.ones(C, dtype=torch.bfloat16),
                    p + "post_attention_layernorm.weight": torch.ones(C, dtype=torch.bfloat16)}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = dict(model_type="llama", architectures=["LlamaForCausalLM"], num_hidden_layers=layers,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0, rope_scaling=None,
                  tie_word_embeddings=True, hidden_act="silu", torch_dtype="bfloat16", **SHAPE)
    (folder / "config.json").write_text(json.dumps(config))


def measure(path: str) -> None:
    import pandas, plotly, streamlit  # noqa: E401,F401  (the server imports them before any model)
    import psutil

    from lpos import checkpoints

    tokenizer = characters(SHAPE["vocab_size"]) if Path(path).is_dir() else None
    before = psutil.Process().memory_info().rss / 2**20
    model, _ = checkpoints.load(path, tokenizer=tokenizer)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    loaded = psutil.Process().memory_info().rss / 2**20
    weights = 4 * model.num_params() / 2**20
    # What Inside, Order blindness and Stretching add: the other four schemes' untrained models of
    # this shape (lpos.ui.models.untrained_like; one shared copy of the weights)
    from lpos.positions import SCHEMES
    from lpos.ui.caching import remember
    from lpos.ui.models import untrained_like

    remember(model, "llama_memory")
    others = [untrained_like(model, "llama_memory", s) for s in SCHEMES if s != model.config.position]
    compared = psutil.Process().memory_info().rss / 2**20
    compared_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"params_millions": round(model.num_params() / 1e6, 1), "float32_weights_mb": round(weights),
                      "rss_before_mb": round(before), "peak_rss_mb": round(peak),
                      "peak_over_baseline_mb": round(peak - before),
                      "peak_over_baseline_in_float32_copies": round((peak - before) / weights, 2),
                      "rss_after_load_mb": round(loaded),
                      f"rss_with_{len(others)}_comparison_models_mb": round(compared),
                      "peak_rss_building_comparisons_mb": round(compared_peak)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--format", choices=["hf", "lpos"], default="hf")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child process: load this path
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.measure:
        return measure(args.measure)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "smollm2-shaped"
        folder.mkdir()
        build_folder(folder, layers=args.layers)
        path = folder
        if args.format == "lpos":
            from lpos import checkpoints

            model, meta = checkpoints.load(folder, tokenizer=characters(SHAPE["vocab_size"]))
            path = Path(tmp) / "smollm2-shaped.pt"
            checkpoints.save(model, meta, path)
            del model, meta
        subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True, cwd=ROOT, timeout=600)


if __name__ == "__main__":
    main()
