"""The teacher's panel of a live class (lpos.ui.live_class): presenter mode offers a class; a running class
shows its code, link and QR code, large, until the first student follows, then folds to one line with the count,
so the lesson fills the teacher's screen (the panel opens again for latecomers)."""
from __future__ import annotations

import io

import streamlit as st

from lpos.classroom import ClassError, shown_code
from lpos.ui import live_class, teacher_cookie
from lpos.ui.live_class import COUNT_S, LESSON_PATH, keep_alive, start, stop
from lpos.ui.models import label


def class_link(code: str) -> str:
    """The Lesson's own URL with ?class=CODE (st.context.url is the page's: on the Lesson it ends in
    /lesson already, after any base path a proxy adds)."""
    page = (st.context.url or "").split("?")[0].rstrip("/")
    return f"{page if page.endswith('/' + LESSON_PATH) else page + '/' + LESSON_PATH}?class={code}"


def _qr_png(link: str) -> bytes | None:
    try:
        import segno
    except ImportError:  # the QR code is a convenience: the code and link still work
        return None
    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=8, border=2)
    return buffer.getvalue()


def _followers(code: str) -> int | str:
    try:
        return live_class.class_store().followers(code)
    except ClassError as error:
        return str(error)


@st.fragment(run_every=COUNT_S)
def _follower_count(code: str, *, drawn_open: bool) -> None:
    """The count, kept fresh, and the class kept alive while this page is open; the first follower folds the panel."""
    followers = _followers(code)
    if isinstance(followers, str):
        st.caption(followers)
        return
    keep_alive()
    st.metric("Following now", followers)
    if drawn_open and followers:
        st.rerun()  # the whole page: drawn again, the panel folded


def teacher_panel(*, presenter: bool) -> None:
    """Presenter mode's offer of a class, or the running class's panel."""
    teaching = st.session_state.get("live_teacher")
    teacher_cookie.keep(teaching)
    if not teaching:
        if presenter:
            st.button("Start a live class", key="live_start", on_click=start, icon=":material/groups:",
                      help="Students open the link or type the code, and their Lesson follows yours.")
        return
    code, link = teaching["code"], class_link(teaching["code"])
    followers = _followers(code)  # a count, or what went wrong asking the store
    counted, drawn_open = isinstance(followers, int), not (isinstance(followers, int) and followers)
    with st.expander(f"Live class {shown_code(code)}" + (f" · {followers} following" if counted else ""),
                     expanded=drawn_open, icon=":material/groups:"):
        words, qr = st.columns([3, 1], vertical_alignment="center")
        with words:
            with st.container(key="live_class_code"):  # drawn large by lpos.ui.lesson.presenter_css
                st.title(shown_code(code), anchor=False)
            st.code(link, language=None)
            st.caption("If this page loses its server or is reloaded, it takes the class back by itself: this "
                       "browser keeps the class in a cookie until the class ends.")
            _follower_count(code, drawn_open=drawn_open)
            if live_class.own_upload():
                st.caption(f"Students see {label(live_class.local_view().model)}: your uploaded model stays in this browser.")
            if st.session_state.get("live_lab_run"):
                st.caption("Your class sees your latest lab run under their banner: as it trains, then how far it reads.")
                st.button("Stop showing the lab run", key="live_hide_lab", on_click=live_class.hide_lab_run,
                          icon=":material/visibility_off:")
            st.button("End the class", key="live_stop", on_click=stop, icon=":material/stop_circle:")
        png = _qr_png(link)
        if png:
            qr.image(png, caption="Scan to follow", width="stretch")
