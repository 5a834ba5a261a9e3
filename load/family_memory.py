"""Memory and first page of a Qwen2.5-0.5B-shaped model (random weights, built with transformers), opened
from its Hugging Face folder as the app opens a shared-folder model.

Setup (not measured): transformers' Qwen2ForCausalLM of Qwen2.5-0.5B's shape (24 layers, width 896, 14 heads,
2 key/value heads, hidden 4,864, vocabulary 151,936, tied, q/k/v biases, RoPE base 1,000,000), initialised
at random in bfloat16 as it ships and saved with save_pretrained, beside a tokenizer.json of the printable
ASCII characters and filler tokens up to the vocabulary. Then, each in a fresh process:
- memory: import what the server imports (streamlit, pandas, plotly, lpos), note the RSS, open the folder
  with lpos.checkpoints.load and print the peak RSS over that baseline against the folder's file size
  (with --float32: every weight read as float32, for comparison);
- first page: LPOS_CHECKPOINT_DIR holds the folder, and an AppTest of app.py opens the first page with
  `model=dir:<folder>`; the seconds until it is drawn (the model loaded and its first figures computed).

Run: python load/family_memory.py                 (both measurements, about 2 GB of disk and memory)
     python load/family_memory.py --layers 2      (a smoke run)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14, num_key_value_heads=2,
             vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
             tie_word_embeddings=True)
NAME = "qwen2.5-0.5b-shaped"


def build_folder(folder: Path, *, layers: int) -> None:
    import tokenizers
    import torch
    import transformers

    config = transformers.Qwen2Config(**SHAPE, num_hidden_layers=layers)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM._from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    characters = [chr(c) for c in range(32, 127)]
    vocab = {c: i for i, c in enumerate(characters)}
    vocab.update({f"<filler {i}>": i for i in range(len(characters), SHAPE["vocab_size"])})
    tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[])).save(str(folder / "tokenizer.json"))


def measure_memory(path: str, float32: bool) -> dict:
    import pandas, plotly, streamlit  # noqa: E401,F401  (the server imports them before any model)
    import psutil

    from lpos import checkpoints

    before = psutil.Process().memory_info().rss / 2**20
    started = time.perf_counter()
    model, meta = checkpoints.load(path, float32=float32)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    files = sum(f.stat().st_size for f in Path(path).glob("*.safetensors")) / 2**20
    held = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    return {"float32": float32, "params_millions": round(model.num_params() / 1e6, 1), "files_mb": round(files),
            "weights_held_mb": round(held), "rss_before_mb": round(before), "peak_rss_mb": round(peak),
            "peak_over_baseline_mb": round(peak - before), "over_file_size": round((peak - before) / files, 2),
            "load_seconds": round(seconds, 1), "source": meta["source"]}


def measure_first_page(folder: Path) -> dict:
    os.environ["LPOS_CHECKPOINT_DIR"] = str(folder.parent)
    from lpos.ui.harness import app_test

    started = time.perf_counter()
    at = app_test(timeout=600)
    at.query_params["model"] = f"dir:{folder.name}"
    at.run()
    seconds = time.perf_counter() - started
    return {"first_page_seconds": round(seconds, 1), "exceptions": [e.message[:200] for e in at.exception],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child process: what to measure, on which path
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    # its weights as held (the token table float32, the blocks' matrices bfloat16) take about 1.3 GB: over the
    # default cap of 1,024 MB, which a server opening such a model raises the same way
    os.environ.setdefault("LPOS_MAX_UPLOAD_MB", "2048")
    if args.measure:
        result = measure_first_page(Path(args.path)) if args.measure == "page" else \
            measure_memory(args.path, args.measure == "float32")
        return print(json.dumps(result))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / NAME
        build_folder(folder, layers=args.layers)
        for what in ("stored", "float32", "page"):
            subprocess.run([sys.executable, __file__, "--measure", what, "--path", str(folder)], check=True, cwd=ROOT,
                           timeout=900)


if __name__ == "__main__":
    main()
