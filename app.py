"""lpos — the Streamlit entry point: page navigation and the sidebar every page shares."""
import streamlit as st

from lpos import ui

st.set_page_config(page_title="lpos — where does each token sit?", page_icon="📍", layout="wide")

PAGES = {
    "Start here": [
        st.Page("pages/embeddings.py", title="Embeddings: token + position", icon="🧱", default=True),
    ],
}

page = st.navigation(PAGES)
st.session_state["selection"] = ui.sidebar()
page.run()
