"""Server-side memory, step by step, in one process, the way the server holds its models: imports,
the shipped models, one untrained model per scheme, then scoring 1,024 tokens.

Run: python load/memory_steps.py            (the server's settings)
     python load/memory_steps.py --plain    (glibc's default heap, a dense table per model)
docs/PERFORMANCE.md quotes both.
"""
import argparse
import gc
import resource
import sys
from pathlib import Path

import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lpos import checkpoints  # noqa: E402
from lpos.analysis.lengths import story, token_losses  # noqa: E402
from lpos.model import GPT, GPTConfig, initial_token_table  # noqa: E402
from lpos.positions import SCHEMES  # noqa: E402
from lpos.tokenizer import encode  # noqa: E402
from lpos.ui.collect import map_large_allocations  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--plain", action="store_true", help="no mallopt, no shared token table")
plain = parser.parse_args().plain

process = psutil.Process()


def mb() -> float:
    return process.memory_info().rss / 2**20


def peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


import pandas, plotly, streamlit  # noqa: E401,E402,F401  (imported for their memory: the app loads them)
print(f"imports: {mb():.0f} MB")
if not plain:
    map_large_allocations()
models = [checkpoints.load(name)[0] for name in checkpoints.available()]
if not plain:
    bases = {}
    for model in models:
        seed = model.config.init_seed
        if seed not in bases:
            bases[seed] = initial_token_table(model.config)
        model.share_token_table(bases[seed])
gc.collect()
print(f"{len(models)} shipped: {mb():.0f} MB")
untrained = []
for scheme in SCHEMES:
    torch.manual_seed(0)
    model = GPT(GPTConfig(position=scheme, init_seed=checkpoints.SHIPPED_SEED)).eval()
    if untrained or not plain:  # as lpos.ui.models.untrained: one table for all (and, with sharing, the shipped ones)
        table = untrained[0].transformer.wte.weight if plain else torch.nn.Parameter(bases[checkpoints.SHIPPED_SEED])
        model.transformer.wte.weight = model.lm_head.weight = table
    untrained.append(model)
gc.collect()
print(f"+ {len(untrained)} untrained (one table): {mb():.0f} MB, peak {peak():.0f}")
ids = torch.tensor(encode(story())[:1024])
before = peak()
with torch.no_grad():
    token_losses(untrained[1], ids)
print(f"after scoring 1,024 tokens, untrained sinusoidal: now {mb():.0f} MB, peak {peak():.0f} (was {before:.0f})")
with torch.no_grad():
    token_losses(models[checkpoints.available().index("sinusoidal")], ids)
print(f"after scoring 1,024 tokens, shipped sinusoidal: now {mb():.0f} MB, peak {peak():.0f}")
