"""A live class on the Lesson: a teacher starts one from presenter mode and shows its code, link and
QR code; students who open the link follow the teacher's step, sentence, scheme and model, and watch the
teacher's lab run train (lpos.ui.lab.watch) while the teacher shows it.

This browser session's state: "live_teacher" ({"code", "secret"}) while it teaches; "live_class", the class a
student joined; "live_following", whether the page follows it now; "live_seen", the teacher's view as last applied
here, and "live_before" what the page showed before it; "live_published", the view a teacher last sent;
"live_lab_run", the lab run the class watches (a teacher's latest run, or ""). A follower's Lesson holds a fragment
that reruns every POLL_S seconds and asks the store (lpos.classroom) for the class's version only; when the teacher
moved, it reruns the app, and `before_widgets` (app.py's sidebar, before its widgets) copies the view in.
A student who changes the view themselves is exploring; one click rejoins. Every failure (a
forged or expired code, a full class, an unreachable store) is a sentence; the page keeps working.

A browser sends its control values with every run it asks for, timers' included; one that has not yet drawn
the run applying the teacher's view sends the values from before it (a pending full run takes the newest
request's values). So that earlier view, arriving within STALE_S, is a late echo, put back, never the student
moving; and the teacher's timer sends the view last published, never what a timer's run carries.

A replica that dies takes its sessions' state with it, the teacher's secret included. So the teacher's
browser also keeps the class in a cookie (lpos.ui.teacher_cookie, written by the page itself, never in a URL);
a new session, on whichever replica the page reconnects to, reads it (st.context.cookies) and teaches
the class again from its current view (`take_back`).
"""
from __future__ import annotations

import math
import secrets
import time
from dataclasses import replace

import streamlit as st

from lpos.class_store import open_store
from lpos.classroom import ENDED, Broadcast, ClassEnded, ClassError, GuessLimiter, parse_code, shown_code
from lpos.checkpoints import ModelRef
from lpos.lesson import STEPS
from lpos.pages import page_named
from lpos.positions import DEFAULT_SCHEME, SCHEMES
from lpos.ui.models import UNTRAINED, offered
from lpos.ui.selection import MAX_CHARS
from lpos.ui import teacher_cookie
from lpos.ui.text import literal

POLL_S = 1.0  # a follower asks for the class's version this often: the step latency's upper part
COUNT_S = 3.0  # the teacher's count of followers (and the word that keeps the class alive)
STALE_S = 10.0  # how long after the teacher's view is applied the view before it may still come back from the browser
LESSON_PATH = page_named("lesson").url_path


@st.cache_resource(show_spinner=False)
def class_store():
    """One store per process: classes in memory, or in Redis when LPOS_REDIS_URL is set."""
    return open_store()


def _session() -> str:
    return st.session_state.setdefault("live_session", secrets.token_hex(12))


def _notify(message: str) -> None:
    """A warning shown at the top of the next full run (lpos.ui.state.sidebar shows url_notices)."""
    st.session_state.setdefault("url_notices", []).append(message)


def _default_model(scheme: str) -> str:
    return scheme if scheme in offered() else UNTRAINED


def own_upload() -> bool:
    """Whether this session shows its own upload (this browser's alone: never sent to a class)."""
    model = st.session_state.get("model")
    return model is not None and ModelRef.parse(model).is_upload


def local_view() -> Broadcast:
    """What this session shows now (an upload is this browser's own: the scheme's default goes out)."""
    state = st.session_state
    scheme = state.get("scheme", DEFAULT_SCHEME)
    model = state.get("model", _default_model(scheme))
    return Broadcast(step=int(state.get("lesson_step", 1)), text=state.get("sentence", state.get("url_text") or ""),
                     scheme=scheme, model=_default_model(scheme) if own_upload() else model,
                     lab_run=state.get("live_lab_run", ""))


def before_widgets() -> None:
    """In app.py's run, before the sidebar draws: join the class a link names (once per session) and,
    while following, copy the teacher's latest view into this session's controls."""
    if "live_link_read" not in st.session_state:
        st.session_state.update(live_link_read=True, live_following=False)
        if "class" in st.query_params:
            join(st.query_params["class"])
        else:
            take_back()
    if st.session_state.get("live_following"):
        _catch_up()


def take_back() -> None:
    """A browser whose teacher cookie names a live class and its secret teaches that class again, from the
    class's current view (its replica died, or the page was reloaded). Anything else leaves the page alone:
    the teacher panel clears a cookie that no longer opens a class."""
    found = teacher_cookie.read()
    if st.session_state.get("live_teacher") or found is None:
        return
    code, secret = found
    try:
        view = class_store().resume(code, secret)
    except ClassError:
        return
    st.session_state.update(live_teacher={"code": code, "secret": secret}, live_published=view)
    _apply(view)
    _notify(f"You are teaching class {shown_code(code)} again, at its step {view.step}: this browser kept the class "
            "when the page lost its server or was reloaded.")


def join(raw: str) -> None:
    """Join the class `raw` names; a refused code costs a guess (GuessLimiter) and says why."""
    limiter = st.session_state.setdefault("live_guesses", GuessLimiter())
    now = time.monotonic()
    wait = limiter.wait_s(now)
    if wait > 0:
        st.query_params.pop("class", None)
        _notify(f"Too many class codes were tried from this page: wait {math.ceil(wait)} s, then open the link again.")
        return
    code = parse_code(raw)
    try:
        if code is None:
            raise ClassEnded(f"“{literal(raw[:40])}” is not a class code: a code is eight letters and digits, "
                             "like K7QM-X4TR. The page is yours to explore.")
        view = class_store().follow(code, _session())
    except ClassError as error:
        if isinstance(error, ClassEnded):
            limiter.failed(now)
        st.query_params.pop("class", None)
        _notify(f"No class has the code {shown_code(code)}: it has ended, expired, or was mistyped. "
                "The page is yours to explore." if code and isinstance(error, ClassEnded) else str(error))
        return
    _leave_teaching()
    st.query_params["class"] = code
    st.session_state.update(live_class=code, live_following=True)
    _apply(view)


def _join_typed() -> None:
    join(st.session_state["live_code"])
    st.session_state["live_code"] = ""


def _apply(view: Broadcast) -> None:
    """Put the teacher's view into this session's controls (before they are drawn)."""
    state = st.session_state
    scheme = view.scheme if view.scheme in SCHEMES else state.get("scheme", DEFAULT_SCHEME)
    model = view.model if view.model in offered() else _default_model(scheme)
    applied = replace(view, step=min(max(view.step, 1), len(STEPS)), text=view.text[:MAX_CHARS], scheme=scheme,
                      model=model)
    if "sentence" in state:  # the box exists: its key holds its value, and its initial value no longer
        state.update(sentence=applied.text, url_text="")  # counts ("" keeps Streamlit from warning of both)
    else:  # a new box starts from url_text (lpos.ui.state.init_from_url says why)
        state["url_text"] = applied.text
    seen = state.get("live_seen")
    if seen is None or seen.version != applied.version:  # a new view: what the page showed may still echo
        state.update(live_before=local_view(), live_applied_at=time.monotonic())
    state.update(scheme=scheme, model=model, lesson_step=applied.step, live_lab_run=applied.lab_run, live_seen=applied)


def _late_echo(view: Broadcast) -> bool:
    """`view` is what this page showed before the teacher's latest view, echoed late (module docstring)."""
    state = st.session_state
    before = state.get("live_before")
    return before is not None and view.same_view(before) \
        and time.monotonic() - state.get("live_applied_at", -math.inf) < STALE_S


def _moved_here(seen: Broadcast) -> bool:
    """The student changed the step, sentence, scheme or model since the teacher's view was applied."""
    shown = local_view()
    return own_upload() or not (shown.same_view(seen) or _late_echo(shown))


def _catch_up() -> None:
    seen = st.session_state.get("live_seen")
    if seen is not None and _moved_here(seen):
        _explore_by_hand()
        return
    if seen is not None and not local_view().same_view(seen):
        _apply(seen)  # a late echo of the view before: the teacher's view back in the controls
    try:
        answer = class_store().follow(st.session_state["live_class"], _session(),
                                      known_version=seen.version if seen else -1)
    except ClassEnded:
        _class_over()
        return
    except ClassError as error:  # a full class or an unreachable store: say so, try again on the next poll
        _notify(str(error))
        return
    if isinstance(answer, Broadcast):
        _apply(answer)


def _explore_by_hand() -> None:
    explore()
    _notify("You changed the view yourself, so you are exploring on your own; “Rejoin the class” follows "
            "the teacher again.")


def _class_over() -> None:
    st.session_state.update(live_following=False, live_class=None, live_seen=None, live_lab_run="")
    st.query_params.pop("class", None)
    _notify(ENDED)


def explore() -> None:
    """Stop following (the class keeps this student's place: "Rejoin the class")."""
    st.session_state["live_following"] = False
    if st.session_state.get("live_class"):
        class_store().leave(st.session_state["live_class"], _session())


def rejoin() -> None:
    st.session_state.update(live_following=True, live_seen=None)  # before_widgets applies the teacher's view


@st.fragment(run_every=POLL_S)
def _poll() -> None:
    """A follower's timer: rerun the app when the teacher moved or the class ended.

    A timer's run is never the student's doing, yet it may carry a late echo (module docstring): a difference
    only puts the teacher's view back in the state (the page shows it already; a full run asked for here would
    take the next late echo with it). The student's own moves are read in before_widgets and teach()."""
    seen, code = st.session_state.get("live_seen"), st.session_state.get("live_class")
    if not st.session_state.get("live_following") or code is None or seen is None:
        return
    if not local_view().same_view(seen):
        _apply(seen)
    try:
        answer = class_store().follow(code, _session(), known_version=seen.version)
    except ClassEnded:
        st.rerun(scope="app")  # before_widgets finds it ended and says so
    except ClassError as error:
        st.caption(f"{error} Retrying every {POLL_S:g} s.")
        return
    if isinstance(answer, Broadcast):
        st.rerun(scope="app")


def watched_lab_run() -> str:
    """The teacher's lab run this page shows while it follows the class, or ""."""
    seen = st.session_state.get("live_seen")
    return seen.lab_run if st.session_state.get("live_following") and seen is not None else ""


def show_lab_run(run_id: str) -> None:
    """A teaching session's new lab run goes to its class (the Lab page calls this when the teacher starts one):
    the view last published, with the run, so the class stays at the teacher's step."""
    if st.session_state.get("live_teacher"):
        st.session_state["live_lab_run"] = run_id
        _publish(replace(st.session_state.get("live_published") or local_view(), lab_run=run_id))


def shows_lab_run(run_id: str) -> bool:
    """Whether this session teaches a class that watches `run_id`."""
    return bool(st.session_state.get("live_teacher")) and st.session_state.get("live_lab_run") == run_id


def hide_lab_run() -> None:
    st.session_state["live_lab_run"] = ""  # the Lesson's next run publishes the view without it


def student_banner() -> None:
    """Whether this page follows a class, with the one click that changes it."""
    code = st.session_state.get("live_class")
    if not code:
        if not st.session_state.get("live_teacher"):
            with st.popover("Join a class", icon=":material/group_add:"):
                st.text_input("Class code", key="live_code", max_chars=20, placeholder="K7QM-X4TR",
                              on_change=_join_typed, help="The code your teacher shows: eight letters and digits.")
        return
    following = st.session_state.get("live_following")
    with st.container(border=True, key="live_student"):
        said, act = st.columns([4, 1], vertical_alignment="center")
        if following:
            shown = "step, sentence and scheme, and their lab run" if watched_lab_run() else "step, sentence and scheme"
            said.markdown(f"**Following the teacher** in class {shown_code(code)}: your page shows their {shown}.")
            act.button("Explore on my own", key="live_explore", on_click=explore, icon=":material/explore:")
            _poll()
        else:
            said.markdown(f"**Exploring on your own.** Class {shown_code(code)} goes on without you.")
            act.button("Rejoin the class", key="live_rejoin", on_click=rejoin, icon=":material/group:")


def _leave_teaching() -> None:
    teaching = st.session_state.pop("live_teacher", None)
    for key in ("live_published", "live_lab_run"):
        st.session_state.pop(key, None)
    if teaching:
        try:
            class_store().end(teaching["code"], teaching["secret"])
        except ClassError:
            pass  # already over


def start() -> None:
    """Start a class showing this session's view; this session holds its secret (never in a URL)."""
    if st.session_state.get("live_class"):
        explore()
        st.session_state.update(live_class=None, live_seen=None)
    _leave_teaching()
    view = local_view()
    try:
        code, secret = class_store().start(view)
    except ClassError as error:
        _notify(str(error))
        return
    st.session_state.update(live_teacher={"code": code, "secret": secret}, live_published=view)


def stop() -> None:
    _leave_teaching()


def teach() -> None:
    """The Lesson's step fragment calls this on every run: a teacher's view goes to the class; a follower
    whose step differs from the teacher's moved it (Previous, Next, the step box rerun only this
    fragment, and only by the student's hand), so it is exploring from now on."""
    seen = st.session_state.get("live_seen")
    if st.session_state.get("live_following") and seen is not None \
            and st.session_state.get("lesson_step") != seen.step:
        _explore_by_hand()
        st.rerun(scope="app")  # the banner says so
    _publish(local_view())


def keep_alive() -> None:
    """The teacher's timer: keeps the class alive with the view last published (never a timer run's values)."""
    _publish(st.session_state.get("live_published") or local_view())


def _publish(view: Broadcast) -> None:
    teaching = st.session_state.get("live_teacher")
    if not teaching:
        return
    try:
        st.session_state["live_published"] = class_store().publish(teaching["code"], teaching["secret"], view)
    except ClassEnded:
        st.session_state.pop("live_teacher", None)
        st.warning("Your class has ended (it expired); start a new one to teach again.", icon=":material/warning:")
    except ClassError as error:
        st.warning(str(error), icon=":material/warning:")
