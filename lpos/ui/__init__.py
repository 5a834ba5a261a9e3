"""The only Streamlit-aware part of lpos: shared controls, URL state, cached loaders."""
import gc

import pandas  # noqa: F401  (imported before the freeze below: every page uses them)
import plotly.graph_objects  # noqa: F401
import plotly.subplots  # noqa: F401
import torch  # noqa: F401

from lpos.ui.cached import embedding_view
from lpos.ui.guards import usable_ids
from lpos.ui.state import DEFAULT_TEXT, Selection, selection, sidebar

# Streamlit runs a full garbage collection after every script run (runner.postScriptGC). With
# torch, Plotly, pandas and Streamlit loaded, that walks about 280,000 long-lived objects, mostly
# the libraries' own functions: 95 ms per run, holding the GIL, a third of the server's time under
# load (docs/RELIABILITY.md). Those objects live as long as the process, so move them out of the
# collector's sight once; what sessions create is still collected after every run.
gc.collect()
gc.freeze()

__all__ = ["DEFAULT_TEXT", "Selection", "embedding_view", "selection", "sidebar", "usable_ids"]
