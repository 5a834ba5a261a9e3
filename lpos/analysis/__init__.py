"""Pure analysis: tensors in, small result objects or DataFrames out. No Streamlit.

One module per question: embeddings (token + position = sum), sinusoids, similarity (cosine
maps, neighbours, PCA), attention (weights, RoPE, ALiBi), biases (a bias scheme's bias against
distance), counts (CoPE's contextual positions), shuffle (order blindness), lengths
(loss against length).
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
