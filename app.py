"""lpos — the Streamlit entry point: page navigation and the sidebar every page shares."""
import streamlit as st

from lpos import ui
from lpos.ui.profiling import profiled

st.set_page_config(page_title="lpos — where does each token sit?", page_icon="📍", layout="wide")

# The default page is served at the root URL but reserves its own path ("embeddings" from its file name),
# which the alias below takes instead; "root" is a path nobody types.
EMBEDDINGS = st.Page("pages/embeddings.py", title="Embeddings: token + position", icon=":material/view_module:",
                     url_path="root", default=True)


def embeddings_by_name() -> None:
    """/embeddings, typed or linked: the Embeddings page lives at the app's root URL, so go there (with the link's
    query parameters) instead of Streamlit's "Page not found"."""
    st.switch_page(EMBEDDINGS, query_params=st.query_params.to_dict())


PAGES = {
    "Start here": [
        EMBEDDINGS,
        st.Page(embeddings_by_name, title="Embeddings", url_path="embeddings", visibility="hidden"),
        st.Page("pages/lesson.py", title="Lesson: the story of positions", icon=":material/school:"),
    ],
    "What each scheme is": [
        st.Page("pages/sinusoids.py", title="Sinusoids", icon=":material/waves:"),
        st.Page("pages/similarity.py", title="Similarity and neighbours", icon=":material/explore:"),
        st.Page("pages/attention.py", title="Positions in attention", icon=":material/rotate_right:",
                url_path="rope_alibi"),
    ],
    "Experiments": [
        st.Page("pages/shuffle.py", title="Order blindness (shuffle)", icon=":material/shuffle:",
                url_path="order_blindness"),
        st.Page("pages/lengths.py", title="Length extrapolation", icon=":material/straighten:",
                url_path="extrapolation"),
        st.Page("pages/inside.py", title="Inside the model", icon=":material/neurology:"),
        st.Page("pages/stretch.py", title="Stretching the context", icon=":material/open_in_full:"),
        st.Page("pages/timeline.py", title="Training timeline", icon=":material/history:"),
    ],
}

ui.map_large_allocations()  # freed tensors go back to the system (lpos/ui/collect.py)
ui.collect_garbage()  # a full collection now and then, not after every run (lpos/ui/collect.py)
page = st.navigation(PAGES)
st.session_state["selection"] = ui.sidebar()
with profiled(page.title):  # LPOS_PROFILE=<folder>: one pyinstrument report per run (lpos/ui/profiling.py)
    page.run()
