"""The only Streamlit-aware part of lpos: shared controls, URL state, cached loaders."""
from lpos.ui.cached import embedding_view
from lpos.ui.collect import collect_garbage, map_large_allocations
from lpos.ui.guards import usable_ids
from lpos.ui.state import DEFAULT_TEXT, Selection, selection, sidebar

__all__ = ["DEFAULT_TEXT", "Selection", "collect_garbage", "map_large_allocations", "embedding_view", "selection", "sidebar", "usable_ids"]
