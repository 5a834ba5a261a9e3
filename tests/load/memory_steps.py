"""Server-side memory, step by step, in one process: imports, the five shipped models, the five
untrained ones, then scoring 1,024 tokens. Run: python tests/load/memory_steps.py (docs/PERFORMANCE.md)."""
import resource
import sys
from pathlib import Path

import psutil
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lpos import checkpoints
from lpos.model import GPT, GPTConfig
from lpos.analysis.lengths import token_losses, story
from lpos.tokenizer import encode
p = psutil.Process()
mb = lambda: p.memory_info().rss / 2**20
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import pandas, plotly, streamlit  # noqa: E401,F401  (imported for their memory: the app loads them)
print(f"imports: {mb():.0f} MB")
models = [checkpoints.load(n)[0] for n in checkpoints.available()]
print(f"five shipped: {mb():.0f} MB")
torch.manual_seed(0); base = GPT(GPTConfig(position="learned")).eval(); untrained = [base]
for s in ["sinusoidal", "rope", "alibi", "none"]:
    torch.manual_seed(0); m = GPT(GPTConfig(position=s)).eval()
    m.transformer.wte.weight = m.lm_head.weight = base.transformer.wte.weight; untrained.append(m)
import gc; gc.collect()
print(f"+ five untrained (shared table): {mb():.0f} MB, peak {peak():.0f}")
ids = torch.tensor(encode(story())[:1024])
before = peak()
with torch.no_grad():
    token_losses(untrained[1], ids)
print(f"after scoring 1,024 tokens, untrained sinusoidal: now {mb():.0f} MB, peak {peak():.0f} (was {before:.0f})")
with torch.no_grad():
    token_losses(models[checkpoints.available().index("sinusoidal")], ids)
print(f"after scoring 1,024 tokens, shipped sinusoidal: now {mb():.0f} MB, peak {peak():.0f}")
