"""Lesson: the story of positions in ten steps, one idea and one live figure each."""
import streamlit as st

from lpos import ui
from lpos.lesson import STEPS
from lpos.ui import class_panel, lab, lesson, live_class
from lpos.ui.export import chart

selection = ui.selection()
if "lesson_step" not in st.session_state:  # first visit in this session: the URL decides
    step, refused = lesson.step_from_url()
    st.session_state.update(lesson_step=step, presenter=st.query_params.get("presenter") == "1")
    if refused:
        st.warning(refused, icon=":material/warning:")


def move(delta: int) -> None:
    st.session_state["lesson_step"] = min(max(1, st.session_state["lesson_step"] + delta), len(STEPS))


def leave_presenter() -> None:
    st.session_state["presenter"] = False


st.sidebar.toggle("Presenter mode", key="presenter",
                  help="Hides the controls and enlarges the text so it reads from the back of a room.")
presenter = st.session_state["presenter"]
if presenter:
    st.query_params["presenter"] = "1"
    st.markdown(lesson.presenter_css(), unsafe_allow_html=True)  # static CSS, no user text
else:
    st.query_params.pop("presenter", None)

if not presenter:
    st.title("Lesson: the story of positions")
    st.caption(lesson.lesson_caption())

live_class.student_banner()
if run_id := live_class.watched_lab_run():
    lab.watch(run_id)
class_panel.teacher_panel(presenter=presenter)


@st.fragment
def step_view() -> None:
    """The step controls and the step they drive: moving through the lesson reruns only this."""
    step = st.session_state["lesson_step"]
    st.query_params["step"] = str(step)
    live_class.teach()  # a class this session teaches follows its step
    back, choose, forward = st.columns([1, 4, 1], vertical_alignment="bottom")
    back.button("Previous", key="lesson_previous", on_click=move, args=(-1,), disabled=step == 1,
                icon=":material/arrow_back:", width="stretch")
    choose.selectbox("Step", range(1, len(STEPS) + 1), key="lesson_step", label_visibility="collapsed",
                     format_func=lambda n: f"Step {n} of {len(STEPS)}: {STEPS[n - 1].title}")
    forward.button("Next", key="lesson_next", on_click=move, args=(1,), disabled=step == len(STEPS),
                   icon=":material/arrow_forward:", width="stretch")
    st.progress(step / len(STEPS))

    current = STEPS[step - 1]
    st.header(f"{step}. {current.title}")
    st.markdown(current.text)
    try:
        shown = lesson.figure(step, selection)
    except ValueError as error:  # a model the lesson cannot draw (e.g. an upload of an unusual size)
        st.warning(f"This step cannot be drawn for the chosen model: {error}", icon=":material/warning:")
    else:
        if isinstance(shown.figure, str):  # step 1: the token chips, escaped HTML from token_chips_html
            with st.container(key=f"lesson_figure_{step}"):
                st.html(shown.figure)
        else:
            chart(lesson.presenter_figure(shown.figure) if presenter else shown.figure, recipe=shown.recipe,
                  name=f"lesson-step-{step}", model=shown.model, key=f"lesson_figure_{step}")
        if shown.measured:
            st.markdown(shown.measured)
    st.info(f"**What to notice.** {current.notice}", icon=":material/visibility:")
    if current.further:
        st.page_link(current.further[0], label=current.further[1], icon=":material/arrow_forward:")


step_view()
if presenter:
    st.button("Leave presenter mode", key="leave_presenter", on_click=leave_presenter, icon=":material/close:")
