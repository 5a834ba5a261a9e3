"""The teacher's cookie: a live class's code and secret kept by the teacher's browser ("lpos_teacher"), so
that a new session, on whichever replica the page reconnects to, can teach the class again
(lpos.ui.live_class.take_back). Written by the page itself (Streamlit sets no cookie of its own from
the server), `SameSite=Strict`, never in a URL, cleared when the browser teaches no class. Its value is
checked against COOKIE_VALUE both ways: only a code and a URL-safe secret are ever read or written, so
nothing else reaches the script that writes it."""
from __future__ import annotations

import re

import streamlit as st

from lpos.classroom import IDLE_EXPIRY_S

NAME = "lpos_teacher"  # "<code>.<secret>" while this browser teaches a class
COOKIE_VALUE = re.compile(r"[A-Z0-9]+\.[A-Za-z0-9_-]+")  # a code and a token_urlsafe secret, nothing else


def _sent() -> str:
    """The cookie as the session's first request sent it ("" without one, and where there is no browser, as
    in Streamlit's AppTest, whose context is a stand-in)."""
    value = st.context.cookies.get(NAME, "")
    return value if isinstance(value, str) else ""


def read() -> tuple[str, str] | None:
    """(code, secret) from this browser's cookie, or None."""
    raw = _sent()
    return tuple(raw.split(".")) if COOKIE_VALUE.fullmatch(raw) else None


def keep(teaching: dict | None) -> None:
    """Keep this browser's cookie equal to the class it teaches (cleared when it teaches none)."""
    want = f"{teaching['code']}.{teaching['secret']}" if teaching else ""
    if st.session_state.get("live_cookie", _sent()) == want:  # a class taken back from the cookie: already there
        return
    age = round(IDLE_EXPIRY_S) if want else 0
    st.html(script(want, age), unsafe_allow_javascript=True)
    st.session_state["live_cookie"] = want


def script(value: str, max_age: int) -> str:
    """The one script lpos sends: it sets (max_age 0: clears) the cookie to a checked value."""
    if value and not COOKIE_VALUE.fullmatch(value):
        raise ValueError("a teacher cookie holds a class code and a URL-safe secret only")
    return f"<script>document.cookie = '{NAME}={value}; path=/; max-age={int(max_age)}; SameSite=Strict';</script>"
