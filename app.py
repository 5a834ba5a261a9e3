"""lpos — the Streamlit entry point: page navigation and the sidebar every page shares."""
import streamlit as st

from lpos import ui
from lpos.pages import GROUPS, PAGES
from lpos.ui.profiling import profiled

st.set_page_config(page_title="lpos — where does each token sit?", page_icon="📍", layout="wide")


def redirect(target: st.Page, url_path: str) -> st.Page:
    """A hidden page at `url_path` that opens `target`, with the link's query parameters: a path a page was
    served at before, or the default page's own name (it lives at the app's root URL)."""
    def go() -> None:
        st.switch_page(target, query_params=st.query_params.to_dict())

    return st.Page(go, title=f"{target.title} (/{url_path})", url_path=url_path, visibility="hidden")  # titles are unique


def navigation() -> dict[str, list[st.Page]]:
    """The menu from the page registry (lpos.pages), each group in order, each page's old paths leading to it.
    The default page reserves its own name as a path although it is served at the root: "root", a path
    nobody types, takes that reservation, and its name leads to the root like an old path."""
    menu = {group: [] for group in GROUPS}
    for declared in PAGES:
        page = st.Page(declared.file, title=declared.title, icon=declared.icon, default=declared.default,
                       url_path="root" if declared.default else declared.url_path)
        aliases = (declared.name, *declared.old_paths) if declared.default else declared.old_paths
        menu[declared.group] += [page, *(redirect(page, path) for path in aliases)]
    return menu


ui.map_large_allocations()  # freed tensors go back to the system (lpos/ui/collect.py)
ui.collect_garbage()  # a full collection now and then, not after every run (lpos/ui/collect.py)
ui.release_idle_models()  # above LPOS_MODEL_MEMORY_MB, the models no run asked for in 30 s (lpos/resident.py)
page = st.navigation(navigation())
st.session_state["selection"] = ui.sidebar()
with profiled(page.title):  # LPOS_PROFILE=<folder>: one pyinstrument report per run (lpos/ui/profiling.py)
    page.run()
