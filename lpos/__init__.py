"""lpos: how a small GPT turns text into vectors and knows where each token sits."""
__version__ = "0.1.0"
