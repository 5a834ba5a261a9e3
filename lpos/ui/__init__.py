"""The only Streamlit-aware part of lpos: one module per topic (embeddings, sinusoids, similarity,
attention, shuffle, lengths, timeline, stretch and scaling, inside with probes, heads and streaming,
lesson), each holding its page's cached views and sections, and the shared pieces: selection (what
a page reads), models (what the app offers), state (the sidebar and the URL), guards (messages
instead of tracebacks), caching (models named by their key in cache keys), upload, collect (memory)
and profiling."""
from lpos.ui.collect import collect_garbage, map_large_allocations
from lpos.ui.guards import usable_ids
from lpos.ui.models import release_idle_models
from lpos.ui.selection import DEFAULT_TEXT, Selection, selection
from lpos.ui.state import sidebar

__all__ = ["DEFAULT_TEXT", "Selection", "collect_garbage", "map_large_allocations", "release_idle_models", "selection", "sidebar", "usable_ids"]
