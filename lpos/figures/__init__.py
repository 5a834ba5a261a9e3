"""Plotly figure builders: analysis results in, `go.Figure` out, with titles, axis labels and
hover text (and the token chips, plain escaped HTML). No Streamlit. One module per page topic,
as in lpos.analysis."""
from lpos.figures.attention import (alibi_slopes_figure, matrix_panels, offset_scores_figure, rope_angle_figure,
                                    rope_arrow_figure)
from lpos.figures.biases import bias_curves_figure
from lpos.figures.counts import count_heatmap, running_count_figure
from lpos.figures.embeddings import embedding_heatmaps, token_chips_html
from lpos.figures.lengths import length_curves_figure, token_loss_figure
from lpos.figures.shuffle import attention_bars, change_figure, prediction_bars
from lpos.figures.similarity import kernel_line_figure, pca_figure, similarity_heatmaps
from lpos.figures.sinusoids import band_figure, offset_dot_figure, table_heatmap, wavelength_figure

__all__ = [
    "alibi_slopes_figure", "attention_bars", "band_figure", "bias_curves_figure", "change_figure", "count_heatmap",
    "embedding_heatmaps", "kernel_line_figure",
    "length_curves_figure", "matrix_panels", "offset_dot_figure", "offset_scores_figure", "pca_figure",
    "prediction_bars", "rope_angle_figure", "rope_arrow_figure", "running_count_figure", "similarity_heatmaps",
    "table_heatmap",
    "token_chips_html", "token_loss_figure", "wavelength_figure",
]
