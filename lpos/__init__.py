"""lpos: how a small GPT turns text into vectors and knows where each token sits.

The public API (docs/ARCHITECTURE.md), as tiktoken exposes its own:

    import lpos
    ids = lpos.tokenizer.encode("The dog bit the man")
    model, meta = lpos.checkpoints.load("rope")       # or lpos.untrained_model("rope")
    logits, loss = model(torch.tensor([ids]))

Importing lpos loads the model, the schemes, the tokenizer, the corpus and checkpoint reading
only: no Streamlit, no analysis, no tools (lpos.cli, lpos.train, lpos.card, lpos.bench).
"""
from lpos import checkpoints, corpus, positions, tokenizer
from lpos.model import GPT, GPTConfig, untrained_model

__version__ = "0.1.0"
__all__ = ["GPT", "GPTConfig", "checkpoints", "corpus", "positions", "tokenizer", "untrained_model"]
