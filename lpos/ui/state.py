"""The shared sidebar state: sentence, position scheme, model; mirrored into the URL.

The widget keys are "sentence", "scheme" and "model"; the URL carries them as `text`, `scheme`
and `model`, so `?text=The+cat+sat&scheme=rope&model=rope` reopens that view on any page.
Values from the URL are checked against fixed lists; anything else falls back to the default
with a visible notice. A shipped or uploaded model fixes its own scheme, so the two boxes
follow each other: picking a scheme picks its trained model, picking a model sets its scheme.
The sidebar also holds the upload box (lpos.ui.upload): an uploaded model joins the model box for
this session only. A model file that cannot be read is reported and the default is used instead.
"""
from __future__ import annotations

import streamlit as st

from lpos.checkpoints import CheckpointError
from lpos.positions import DEFAULT_SCHEME, HINTS, SCHEMES
from lpos.tokenizer import END_OF_TEXT, END_OF_TEXT_ID, encode
from lpos.ui import live_class
from lpos.ui.caching import remember
from lpos.ui.models import UNTRAINED, LoadedModel, label, load_offered, offered, untrained
from lpos.ui.selection import DEFAULT_TEXT, MAX_CHARS, MAX_TOKENS, Selection
from lpos.ui.upload import uploader

__all__ = ["DEFAULT_TEXT", "MAX_CHARS", "MAX_TOKENS", "init_from_url", "model_options", "sidebar"]


def model_options() -> list[str]:
    return [*offered(), *st.session_state.get("uploads", {})]


def _model_and_meta(key: str, scheme: str):
    if key == UNTRAINED:
        return untrained(scheme), {}
    if key in st.session_state.get("uploads", {}):
        model, meta = st.session_state["uploads"][key]
        return remember(model, key), meta  # the key carries the file's digest
    return load_offered(key)


def _scheme_of(key: str) -> str | None:
    """The scheme a model was built with; None for the untrained model or a file that cannot be read."""
    if key == UNTRAINED:
        return None
    try:
        return _model_and_meta(key, DEFAULT_SCHEME)[0].config.position  # a file's own: the scheme asked is not used
    except CheckpointError:
        return None  # sidebar() reports it


def _default_model(scheme: str) -> str:
    return scheme if scheme in offered() else UNTRAINED


def _on_scheme_change() -> None:
    model = st.session_state.get("model", UNTRAINED)
    if model != UNTRAINED and _scheme_of(model) != st.session_state["scheme"]:
        st.session_state["model"] = _default_model(st.session_state["scheme"])


def _on_model_change() -> None:
    scheme = _scheme_of(st.session_state["model"])
    if scheme is not None:
        st.session_state["scheme"] = scheme


def init_from_url() -> None:
    """Once per session: read the URL, remembering what was refused.

    The sentence is kept under "url_text", not written into the text area's own key: a value
    written into a widget's key before the widget exists, on a link's first run, was at times not
    shown by the browser (an empty box over a page that drew the link's sentence).
    sidebar() passes it as the text area's initial value instead."""
    if "url_read" in st.session_state:
        return
    st.session_state["url_read"] = True
    notices = []
    params = st.query_params
    text = params.get("text", DEFAULT_TEXT)
    if len(text) > MAX_CHARS:
        notices.append(f"The text in the link was cut to its first {MAX_CHARS:,} characters.")
        text = text[:MAX_CHARS]
    scheme = params.get("scheme", DEFAULT_SCHEME)
    if scheme not in SCHEMES:
        notices.append(f"Unknown position scheme {scheme[:40]!r} in the link; showing {DEFAULT_SCHEME!r} instead.")
        scheme = DEFAULT_SCHEME
    model = params.get("model", _default_model(scheme))
    if model not in offered():
        notices.append(f"Unknown model {model[:40]!r} in the link; showing the default for {scheme!r} instead.")
        model = _default_model(scheme)
    model_scheme = _scheme_of(model)
    if model_scheme is not None and model_scheme != scheme:
        notices.append(f"The model {model!r} uses the {model_scheme!r} scheme, so that scheme is shown.")
        scheme = model_scheme
    st.session_state.update(url_text=text, scheme=scheme, model=model, url_notices=notices)


def sidebar() -> Selection:
    """Draw the shared controls (in app.py, once for every page) and return the selection."""
    init_from_url()
    live_class.before_widgets()  # a followed class puts the teacher's view in the controls
    if st.session_state.get("model") not in model_options():  # e.g. an upload that was removed
        st.session_state["model"] = _default_model(st.session_state["scheme"])
    try:
        _model_and_meta(st.session_state["model"], st.session_state["scheme"])
    except CheckpointError as e:  # a damaged file in LPOS_CHECKPOINT_DIR: say so, keep working
        st.session_state["url_notices"] = [*st.session_state.get("url_notices", []),
                                           f"{label(st.session_state['model'])} could not be loaded ({e}); "
                                           "showing another model instead."]
        st.session_state["model"] = _default_model(st.session_state["scheme"])
    with st.sidebar:
        uploader()  # first: a folded one-line box that a 1366×768 laptop shows without scrolling
        # the identity of the box is its key (and max_chars), so `value` only fills a new box
        st.text_area("Sentence", st.session_state["url_text"], key="sentence", max_chars=MAX_CHARS, height=90,
                     help="Any text: it is split into the model's tokens (GPT-2's, unless the model has its own).")
        st.selectbox("Position scheme", SCHEMES, key="scheme", on_change=_on_scheme_change,
                     help="How the model knows where each token sits.")
        st.caption(HINTS[st.session_state["scheme"]])  # whole, under the box: a box cuts a long option at any width
        st.selectbox("Model", model_options(), key="model", on_change=_on_model_change, format_func=label,
                     help="A shipped model trained on children's stories, the same size untrained, "
                          "or a model you upload above (“Upload your own model”).")
    for notice in st.session_state.pop("url_notices", []):
        st.warning(notice, icon=":material/warning:")
    scheme, key = st.session_state["scheme"], st.session_state["model"]
    model, meta = _model_and_meta(key, scheme)
    text = st.session_state["sentence"]
    loaded = LoadedModel(key, label(key), model, meta)
    ids, dropped = loaded.tokenizer.encode_known(text)  # the model's own tokens; a character vocabulary may lack some
    if dropped:  # said where the page is read, with the characters, not below the sidebar's fold
        st.warning(loaded.tokenizer.left_out_sentence(text), icon=":material/warning:")
    if doubt := st.session_state.get("upload_doubts", {}).get(key):  # an upload read with a tokenizer not its own
        st.warning(doubt, icon=":material/warning:")
    if END_OF_TEXT in text and loaded.tokenizer.is_gpt2:  # say what a typed special-token spelling becomes
        st.sidebar.caption(f"“{END_OF_TEXT}” typed here is read as ordinary text ({len(encode(END_OF_TEXT))} tokens), "
                           f"not GPT-2's end-of-text token (id {END_OF_TEXT_ID}) that separates stories in training: "
                           "typed text is never turned into a control token.")
    st.query_params.update({"text": text, "scheme": scheme})
    if loaded.ref.in_links:
        st.query_params["model"] = key
    else:  # an upload is this tab's alone: a copied link opens the scheme's default
        st.query_params.pop("model", None)
    return Selection(text=text, scheme=scheme, model=loaded, ids=ids, dropped=dropped)

