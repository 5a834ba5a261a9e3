"""Driving the app from outside a browser session: what the tests and the bench share.

Streamlit's own pieces, kept here so that only `lpos.ui` imports Streamlit: AppTest in a running
server's navigation mode, and a reader of the messages a server sends over its websocket.
"""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from lpos.ui import plotly_react

APP = Path(__file__).resolve().parent.parent.parent / "app.py"


def server_navigation_mode() -> None:
    """Keep AppTest in the navigation mode of a running server.

    Before every run AppTest forgets whether st.navigation was called and re-detects the pages/
    folder beside app.py, so a page opened with switch_page would run on its own, without app.py.
    A real server does that only for its very first request. No public Streamlit API sets this
    mode (see lpos.ui.selection.selection): hence the patch, applied once per process.
    """
    if getattr(PagesManager.__init__, "lpos_patched", False):
        return
    detect = PagesManager.__init__

    def init(self, *args, **kwargs):
        detect(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False  # what app.py's st.navigation sets

    init.lpos_patched = True
    PagesManager.__init__ = init


def app_test(*, timeout: float = 120) -> AppTest:
    """AppTest of app.py (the sidebar and navigation every page shares). Its charts are st.plotly_chart
    elements, whatever LPOS_PLOTLY_REACT says: AppTest renders no component (lpos.ui.plotly_react)."""
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    at.session_state[plotly_react.AS_ELEMENTS] = True
    return at


def script_finished(frame: bytes) -> bool:
    """True if a websocket frame from the server says a script run finished (not cut short by a rerun)."""
    message = ForwardMsg.FromString(frame)
    return message.WhichOneof("type") == "script_finished" and \
        message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN


def charts_sent(frame: bytes) -> dict[str, str]:
    """{key: figure digest} of the chart a websocket frame sends to lpos.ui.plotly_react, if it sends one:
    what the page must show once drawn (its div's data-drawn)."""
    if plotly_react.NAME.encode() not in frame:  # most frames: no need to parse them
        return {}
    message = ForwardMsg.FromString(frame)
    element = message.delta.new_element if message.WhichOneof("type") == "delta" else None
    if element is None or element.WhichOneof("type") != "bidi_component" or \
            element.bidi_component.component_name != plotly_react.NAME:
        return {}
    data = json.loads(element.bidi_component.json)
    return {data["key"]: data["digest"]}
