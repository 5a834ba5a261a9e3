"""A live class on the Lesson, in AppTest: a teacher's session and students' sessions in one process
share its class store (in memory), as browsers on one server do. A student's full run is what the
follow fragment asks for when the teacher moved (tests/browser/test_browser_live_class.py runs the timer)."""
from __future__ import annotations

import time

import pytest

from conftest import app_test
from lpos.classroom import Broadcast, MemoryStore, new_code
from lpos.ui import live_class
from lpos.ui.harness import app_test as new_app_test

LESSON = "pages/lesson.py"


@pytest.fixture
def store(monkeypatch):
    """A fresh class store for the test (the app's is one per process)."""
    fresh = MemoryStore()
    monkeypatch.setattr(live_class, "class_store", lambda: fresh)
    return fresh


def teacher(**query):
    at = app_test(page=LESSON, presenter="1", **query)
    at.button(key="live_start").click().run()
    assert not at.exception
    return at


def student(code: str, **query):
    """A student's first run, straight on the Lesson with the class link (as a browser opens it)."""
    at = new_app_test()
    for key, value in {"class": code, **query}.items():
        at.query_params[key] = value
    return at.switch_page(LESSON).run()


def step_of(at) -> int:
    return int(at.header[0].value.split(".")[0])


def every_text(at) -> str:
    """Everything the page sent: element protos and the URL."""
    parts = [str(node.proto) for node in at.main] + [str(node.proto) for node in at.sidebar]
    return "\n".join(parts) + str(dict(at.query_params))


def test_a_teacher_gets_a_code_link_and_qr_but_never_shows_the_secret(store):
    at = teacher(step="3")
    code, secret = at.session_state["live_teacher"]["code"], at.session_state["live_teacher"]["secret"]
    assert at.title[0].value == f"{code[:4]}-{code[4:]}"
    assert at.code[0].value.endswith(f"/lesson?class={code}") and at.code[0].value.count("/lesson") == 1
    assert at.get("image"), "a QR code image"
    (panel,) = [e for e in at.expander if e.label.startswith("Live class")]
    assert at.metric[0].value == "0" and panel.proto.expanded  # open until a student follows
    # the secret is nowhere on the page but in the one script that gives it to this browser's cookie
    cookie = f"lpos_teacher={code}.{secret}; path=/"
    assert every_text(at).count(secret) == every_text(at).count(cookie) == 1 and "class" not in at.query_params
    assert store.follow(code, "probe").step == 3


def test_a_follower_page_changes_when_the_teachers_does(store):
    at = teacher()
    code = at.session_state["live_teacher"]["code"]
    pupil = student(code)
    assert not pupil.exception and "Following the teacher" in pupil.markdown[0].value
    assert step_of(pupil) == 1
    at.button(key="lesson_next").click().run()
    at.button(key="lesson_next").click().run()
    pupil.run()
    assert step_of(pupil) == step_of(at) == 3
    at.text_area(key="sentence").input("The cat sat on the mat").run()
    at.selectbox(key="scheme").select("rope").run()
    pupil.run()
    assert pupil.text_area(key="sentence").value == "The cat sat on the mat"
    assert (pupil.selectbox(key="scheme").value, pupil.selectbox(key="model").value) == ("rope", "rope")
    assert step_of(pupil) == 3 and not pupil.exception
    at.run()
    assert at.metric[0].value == "1"
    (panel,) = [e for e in at.expander if e.label.startswith("Live class")]  # folded to one line once a student
    assert panel.label == f"Live class {code[:4]}-{code[4:]} · 1 following" and not panel.proto.expanded  # follows


def test_a_students_link_cannot_move_the_class(store):
    at = teacher(step="2")
    code = at.session_state["live_teacher"]["code"]
    pupil = student(code, step="9", presenter="1", text="my own text", scheme="alibi", model="alibi")
    assert step_of(pupil) == 2  # the class's step, not the link's
    assert "live_teacher" not in pupil.session_state
    pupil.button(key="lesson_next").click().run()
    pupil.text_area(key="sentence").input("hijack").run()
    seen = store.follow(code, "probe")
    assert (seen.step, seen.text) == (2, "The dog bit the man")
    assert not pupil.session_state["live_following"]  # moving on one's own is exploring


def test_explore_stops_following_and_rejoin_resumes_at_the_teachers_step(store):
    at = teacher()
    code = at.session_state["live_teacher"]["code"]
    pupil = student(code)
    pupil.button(key="live_explore").click().run()
    assert "Exploring on your own" in pupil.markdown[0].value
    pupil.button(key="lesson_next").click().run()
    for _ in range(5):
        at.button(key="lesson_next").click().run()
    pupil.run()
    assert step_of(pupil) == 2 and step_of(at) == 6  # exploring: the teacher's moves do not reach it
    pupil.button(key="live_rejoin").click().run()
    assert step_of(pupil) == 6 and "Following the teacher" in pupil.markdown[0].value
    assert pupil.session_state["live_following"]


def test_a_student_who_moves_alone_is_exploring(store):
    at = teacher()
    pupil = student(at.session_state["live_teacher"]["code"])
    pupil.selectbox(key="scheme").select("alibi").run()
    assert not pupil.session_state["live_following"]
    assert any("exploring on your own" in w.value for w in pupil.warning)
    assert pupil.selectbox(key="scheme").value == "alibi"  # the student's own choice stands


def test_a_late_echo_of_the_view_before_the_teachers_is_put_back_not_read_as_exploring(store, monkeypatch):
    """A browser that had not drawn the run applying the teacher's step sends the step it showed before (a timer's
    request coalesced into the next full run): the page stays with the teacher, within STALE_S."""
    at = teacher()
    pupil = student(at.session_state["live_teacher"]["code"])
    at.button(key="lesson_next").click().run()
    pupil.run()
    assert step_of(pupil) == 2
    pupil.selectbox(key="lesson_step").set_value(1).run()  # the values from before the step-2 run was drawn
    assert pupil.session_state["live_following"] and step_of(pupil) == 2
    assert not any("exploring" in w.value for w in pupil.warning)
    assert "Following the teacher" in pupil.markdown[0].value
    monkeypatch.setattr(live_class, "STALE_S", 0.0)  # long after the step was applied: the student's own move
    pupil.selectbox(key="lesson_step").set_value(1).run()
    assert not pupil.session_state["live_following"] and step_of(pupil) == 1
    assert any("exploring on your own" in w.value for w in pupil.warning)


def test_another_view_than_the_one_before_is_the_students_own_at_once(store):
    at = teacher()
    pupil = student(at.session_state["live_teacher"]["code"])
    at.button(key="lesson_next").click().run()
    pupil.run()
    pupil.selectbox(key="lesson_step").set_value(5).run()
    assert not pupil.session_state["live_following"] and step_of(pupil) == 5


def test_followers_watch_the_teachers_lab_run_train_then_see_how_far_it_reads(store):
    at = teacher()
    code = at.session_state["live_teacher"]["code"]
    pupil = student(code)
    at.switch_page("pages/lab.py").run()
    at.selectbox(key="lab_task").set_value("copy")
    at.selectbox(key="lab_scheme").set_value("rope")
    at.select_slider(key="lab_window").set_value(16)
    at.number_input(key="lab_steps").set_value(20)
    at.button(key="lab_start").click().run()
    (run_id,) = at.session_state["lab_runs"]
    assert store.follow(code, "probe").lab_run == run_id and store.follow(code, "probe").step == 1
    assert any("Your live class watches this run" in c.value for c in at.caption)
    pupil.run()
    assert any(m.value == "#### Your teacher's lab run" for m in pupil.markdown)
    assert any(m.value.startswith("**rope on ") for m in pupil.markdown)
    assert not [b for b in pupil.button if b.key.startswith("lab_stop_")]  # only the teacher stops it
    deadline = time.monotonic() + 240
    while not any(m.value.startswith("rope: ") for m in pupil.markdown):
        assert time.monotonic() < deadline, [m.value for m in pupil.markdown]
        time.sleep(1)
        pupil.run()
        assert not pupil.exception
    assert any("at 16 tokens (its window)" in m.value for m in pupil.markdown)
    pupil.button(key=f"lab_keep_{run_id}").click().run()
    assert any("lab-rope-copy-16.pt" in option for option in pupil.selectbox(key="model").options)
    assert pupil.session_state["live_following"] and step_of(pupil) == 1
    at.switch_page(LESSON).run()
    at.button(key="live_hide_lab").click().run()
    assert store.follow(code, "probe").lab_run == ""
    pupil.run()
    assert not any(m.value == "#### Your teacher's lab run" for m in pupil.markdown)


@pytest.mark.parametrize(("code", "said"), [
    ("ZZZZ-ZZZZ", "No class has the code ZZZZ-ZZZZ"),
    ("<b>x</b>", "is not a class code"),
    ("1234567O", "is not a class code"),  # look-alikes are not in the alphabet
])
def test_a_forged_or_malformed_code_gets_a_sentence_and_the_page_works(store, code, said):
    pupil = student(code)
    assert not pupil.exception
    assert any(said in w.value for w in pupil.warning), [w.value for w in pupil.warning]
    assert step_of(pupil) == 1 and "class" not in pupil.query_params
    assert "<b>" not in pupil.warning[0].value  # the typed text is shown as characters (escaped)
    pupil.button(key="lesson_next").click().run()
    assert step_of(pupil) == 2


def test_an_ended_class_says_so_and_the_page_keeps_working(store):
    at = teacher()
    pupil = student(at.session_state["live_teacher"]["code"])
    at.button(key="live_stop").click().run()
    assert "live_teacher" not in at.session_state
    pupil.run()
    assert any("class has ended" in w.value for w in pupil.warning)
    assert not pupil.exception and not pupil.session_state["live_following"]
    pupil.button(key="lesson_next").click().run()
    assert step_of(pupil) == 2


def test_code_guesses_are_rate_limited_per_session(store):
    pupil = app_test(page=LESSON)
    for _ in range(5):
        pupil.text_input(key="live_code").input(new_code()).run()
        assert any("No class has the code" in w.value for w in pupil.warning)
    real, _ = store.start(Broadcast(4, "x", "none", "none"))
    pupil.text_input(key="live_code").input(real).run()
    assert any("Too many class codes" in w.value for w in pupil.warning)
    assert not pupil.session_state.get("live_following")
    other = app_test(page=LESSON)  # another session is not held back
    other.text_input(key="live_code").input(real.lower()).run()
    assert other.session_state["live_following"] and step_of(other) == 4


def test_the_teachers_sentence_reaches_students_as_text_only(store):
    hostile = "**bold** <img src=x onerror=alert(1)> [link](javascript:alert(1)) $x$ :smile:"
    at = teacher()
    at.text_area(key="sentence").input(hostile).run()
    pupil = student(at.session_state["live_teacher"]["code"])
    assert pupil.text_area(key="sentence").value == hostile
    assert not pupil.exception
    for element in pupil.markdown:
        assert "<img" not in element.value and "](javascript" not in element.value
    for element in pupil.get("html"):
        assert "<img" not in element.proto.body


def test_the_lesson_without_a_class_is_unchanged(store):
    at = app_test(page=LESSON, step="4")
    assert step_of(at) == 4 and not at.exception
    assert not at.session_state["live_teacher"] if "live_teacher" in at.session_state else True
    assert [b.key for b in at.button if b.key.startswith("live_")] == []  # no class controls outside presenter mode


def test_the_readme_says_how_to_start_a_class_and_how_students_join():
    """The live class is found in the README, with the controls' own words and how students join."""
    import inspect  # noqa: PLC0415

    from conftest import ROOT  # noqa: PLC0415

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    section = readme[readme.index("### A live class"):]
    section = section[: section.index(" ## ")]
    from lpos.pages import page_named  # noqa: PLC0415

    from lpos.ui import class_panel  # noqa: PLC0415

    source = "".join(inspect.getsource(module) for module in (live_class, class_panel)) + (
        ROOT / page_named("lesson").file).read_text(encoding="utf-8")
    for control in ("Presenter mode", "Start a live class", "Join a class", "End the class"):
        assert f"**{control}**" in section and f'"{control}"' in source, control
    assert "?class=CODE" in section and "LPOS_REDIS_URL" in section
