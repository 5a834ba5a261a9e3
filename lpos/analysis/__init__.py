"""Pure analysis: tensors in, small result objects or DataFrames out. No Streamlit.

One module per question:
- embeddings: what the embedding layer does to a sentence (token rows + position rows = sum)
- sinusoids: the sinusoidal table's frequency bands, wavelengths and offset dot products
- similarity: cosine maps of positions and tokens, nearest neighbours, PCA
- attention: the weights per layer and head, RoPE's turn of a query, ALiBi's effect
- biases: a bias scheme's bias against distance (ALiBi, T5, FIRE)
- counts: CoPE's contextual positions
- scheme_views: which scheme a page's view follows, and what it measures
- shuffle: order blindness (permute every earlier token)
- lengths: loss against length, along a text, the unigram and sliding-window baselines
- coverage: the learned table's rows that training never reached
- stretch: RoPE scaling and positions as a shift
- generate: writing past the wall, one token at a time with a KV cache
- probes: where position lives (linear probes on every residual stream)
- heads: head portraits on held-out text
- streaming: the attention sink, tested with a window of W tokens
- timeline: the snapshots a shipped model kept while it trained

The names below are the ones a notebook reaches for first; every module's own functions are public too.
"""
from lpos.analysis.attention import alibi_effect, attention_maps, offset_scores, queries_and_keys
from lpos.analysis.biases import bias_curves, bias_effect
from lpos.analysis.counts import contextual_counts, count_table
from lpos.analysis.embeddings import embedding_view, repeated_tokens, row_norms, rows_frame
from lpos.analysis.lengths import length_losses, loss_along_text, not_applicable, token_losses, unigram_loss
from lpos.analysis.shuffle import shuffle_earlier, shuffle_experiment, shuffle_table
from lpos.analysis.similarity import cosine_similarity_map, nearest_positions, nearest_tokens, pca
from lpos.analysis.sinusoids import frequency_bands, offset_dot_products, wavelength_frame

__all__ = [
    "alibi_effect", "attention_maps", "bias_curves", "bias_effect", "contextual_counts", "cosine_similarity_map",
    "count_table", "embedding_view", "frequency_bands", "length_losses",
    "loss_along_text", "nearest_positions", "nearest_tokens", "not_applicable", "offset_dot_products",
    "offset_scores", "pca", "queries_and_keys", "repeated_tokens", "row_norms", "rows_frame", "shuffle_earlier",
    "shuffle_experiment", "shuffle_table", "token_losses", "unigram_loss", "wavelength_frame",
]
