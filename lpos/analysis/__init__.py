"""Pure analysis: tensors in, small result objects or DataFrames out. No Streamlit."""
from lpos.analysis.lengths import length_losses, not_applicable, token_losses, unigram_loss

__all__ = ["length_losses", "not_applicable", "token_losses", "unigram_loss"]
