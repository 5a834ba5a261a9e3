"""Plotly figure builders: analysis results in, `go.Figure` out. No Streamlit."""
from lpos.figures.embeddings import embedding_heatmaps, token_chips

__all__ = ["embedding_heatmaps", "token_chips"]
