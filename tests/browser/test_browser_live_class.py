"""A live class in Chromium: a teacher in one browser context, students in others, on one server and
on two replicas sharing a class in Redis. A follower's page must show the teacher's step within
FOLLOW_WITHIN_S of the teacher's run finishing, waited for on Streamlit's own run signals."""
from __future__ import annotations

import os
import re
import time

import pytest

from conftest import finished_runs, new_page, open_url, run_and_wait, start_app, wait_for_app
from test_classroom import redis_url  # noqa: F401 - the real redis-server fixture
from lpos.bench.browser import tab_of
from lpos.lesson import STEPS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# A lost follow never arrives (it showed as 30 s and more); a slow one is a speed question, and speed
# goals live in the benchmark, not here: the 2 s goal (docs/PERFORMANCE.md) is measured by load/live_class_load.py
# (docs/PERFORMANCE.md). This bound only tells a follow that came from one that did not.
FOLLOW_WITHIN_S = float(os.environ.get("LPOS_FOLLOW_WITHIN_S", "15.0"))



def wait_for_step(page, step: int, runs_before: int, *, timeout: float) -> None:
    """Wait for a run the page finished after `runs_before` (Streamlit's script_finished, counted by the harness),
    then until the page is drawn with step `step`'s header."""
    shows_step = f"() => [...document.querySelectorAll('h2')].some(h => h.textContent.startsWith('{step}. '))"
    tab_of(page).wait_drawn(runs_before, timeout=timeout, also=shows_step)


def start_class(teacher, url: str) -> str:
    open_url(teacher, f"{url}/lesson?presenter=1")
    run_and_wait(teacher, teacher.get_by_role("button", name="Start a live class").click)
    code = teacher.locator(".st-key-live_class_code h1").inner_text().strip()
    assert len(code) == 9 and code[4] == "-", code
    code = code.replace("-", "")
    link = teacher.locator("code").filter(has_text="?class=").inner_text().strip()
    assert link == f"{url}/lesson?class={code}", link  # the link students open, as shown
    return code


def runs(page) -> int:
    """The script runs the page has finished so far."""
    return finished_runs(page)


def page_state(page) -> list:
    """What a page shows when a wait for it failed: its runs, URL, script state, what keeps it from counting as
    drawn, its first header and the start of its main text (the sidebar left out)."""
    return [runs(page), page.url, *page.evaluate("""() => [
        document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
        document.querySelectorAll('[data-testid="stSkeleton"], [data-stale="true"], .lpos-plotly[data-drawing]').length,
        document.querySelector('h2')?.textContent,
        document.querySelector('[data-testid="stMainBlockContainer"]')?.innerText.slice(0, 600)]""")]


def follows(students, step: int, since: list[int]) -> float:
    """Seconds until every student's page has finished a run that shows `step` (Streamlit's run signal)."""
    start = time.perf_counter()
    for student, before in zip(students, since):
        try:
            wait_for_step(student, step, before, timeout=30)
        except Exception as error:  # what the student's page showed instead, for the log
            raise AssertionError(f"no run showed step {step} (runs before {before}; page: {page_state(student)})") \
                from error
    return time.perf_counter() - start


# The teacher's class panel (a <details>); it opens and folds with a height animation of about 0.4 s, during
# which the buttons inside already sit where they end up, under what the page shows below the panel. A click sent
# then was lost now and then on a busy machine (docs/RELIABILITY.md, "What was tried"): the tests click once it is still.
PANEL = ("[...document.querySelectorAll('[data-testid=\"stMainBlockContainer\"] [data-testid=\"stExpander\"] details')]"
         ".find(d => d.querySelector('summary').textContent.includes('Live class'))")


def wait_for_panel(teacher, shown: str) -> None:
    """Wait until the teacher's page is drawn, its panel is still (no animation running) and `shown` (a
    JavaScript expression of the panel `d`) holds."""
    still = f"() => {{ const d = {PANEL}; return d !== undefined && !d.getAnimations().length && ({shown}); }}"
    tab_of(teacher).wait_drawn(None, timeout=30, also=still)


def wait_for_folded_panel(teacher) -> None:
    """Wait until the teacher's class panel has folded for its first follower (the panel's timer reruns the page to
    fold it, within COUNT_S): while it folds, the page below it moves up, and a click on Next sent then was lost."""
    wait_for_panel(teacher, "/Live class .* · [1-9][0-9]* following/.test(d.querySelector('summary').textContent)")


def panel_of(teacher):
    """The teacher's class panel (a Playwright locator)."""
    return teacher.get_by_test_id("stMainBlockContainer").get_by_test_id("stExpander").filter(has_text="Live class")


def open_panel(teacher) -> None:
    """Open the teacher's folded class panel and wait until it has finished opening."""
    panel_of(teacher).locator("summary").click()
    wait_for_panel(teacher, "d.open")


def move_and_time(teacher, students, step: int) -> float:
    wait_for_folded_panel(teacher)
    since, teacher_runs = [runs(s) for s in students], runs(teacher)
    # The teacher's page has a timer of its own (the follower count), so "a run finished" may be the
    # timer's: wait for a finished run that shows the new step, as for the students.
    teacher.get_by_role("button", name="Next").click()
    try:
        wait_for_step(teacher, step, teacher_runs, timeout=90)
    except Exception as error:  # what the teacher's page showed instead, for the log
        raise AssertionError(f"the teacher's page did not show step {step} (runs before {teacher_runs}; "
                             f"page: {page_state(teacher)})") from error
    assert teacher.locator("h2").filter(has_text=f"{step}. {STEPS[step - 1].title}").count() == 1
    return follows(students, step, since)


def test_students_follow_explore_and_rejoin(running_app, browser, tmp_path):
    teacher = new_page(browser)
    code = start_class(teacher, running_app.url)
    students = [new_page(browser) for _ in range(2)]
    for student in students:
        open_url(student, f"{running_app.url}/lesson?class={code}")
        assert student.get_by_text("Following the teacher").count() == 1
    waited = [move_and_time(teacher, students, step) for step in (2, 3)]
    assert max(waited) < FOLLOW_WITHIN_S, waited
    teacher.screenshot(path=str(tmp_path / "teacher.png"), full_page=True)
    explorer, follower = students
    run_and_wait(explorer, explorer.get_by_role("button", name="Explore on my own").click)
    run_and_wait(explorer, explorer.get_by_role("button", name="Previous").click)
    assert move_and_time(teacher, [follower], 4) < FOLLOW_WITHIN_S
    assert explorer.locator("h2").filter(has_text="2. ").count() == 1  # exploring: still where they went
    run_and_wait(explorer, explorer.get_by_role("button", name="Rejoin the class").click)
    wait_for_app(explorer)
    assert explorer.locator("h2").filter(has_text="4. ").count() == 1
    explorer.screenshot(path=str(tmp_path / "student.png"), full_page=True)
    open_panel(teacher)  # the panel folded when the first student followed: opened to end the class
    assert follower.get_by_text("Following the teacher").count() == 1  # no late echo read as the student's move
    run_and_wait(teacher, teacher.get_by_role("button", name="End the class").click)
    try:
        follower.wait_for_function("() => document.body.innerText.includes('This class has ended')", timeout=30_000)
    except Exception as error:
        raise AssertionError(f"the follower never heard the class end; its page: {page_state(follower)}; "
                             f"the teacher's: {page_state(teacher)}") from error
    run_and_wait(follower, follower.get_by_role("button", name="Next").click)  # the page keeps working
    for page in (teacher, *students):
        page.context.close()


def test_students_on_another_replica_follow_through_redis(browser, tmp_path, redis_url):  # noqa: F811
    folders = [tmp_path / "r0", tmp_path / "r1"]
    for folder in folders:
        folder.mkdir()
    replicas = [start_app(folder, env={"LPOS_REDIS_URL": redis_url}) for folder in folders]
    try:
        teacher = new_page(browser)
        code = start_class(teacher, replicas[0].url)
        student = new_page(browser)
        open_url(student, f"{replicas[1].url}/lesson?class={code}")
        assert student.get_by_text("Following the teacher").count() == 1
        assert move_and_time(teacher, [student], 2) < FOLLOW_WITHIN_S
        replicas[1].process.terminate()  # the student's replica restarts; the class lives on in Redis
        replicas[1].process.wait(timeout=20)
        replicas[1] = start_app(tmp_path / "r1", env={"LPOS_REDIS_URL": redis_url})
        fresh = new_page(browser)
        open_url(fresh, f"{replicas[1].url}/lesson?class={code}")
        assert fresh.locator("h2").filter(has_text="2. ").count() == 1
        assert move_and_time(teacher, [fresh], 3) < FOLLOW_WITHIN_S
        # the teacher's replica dies: the teacher's browser (its cookie) takes the class back on the other
        # replica, at the class's step, and the follower follows its next step
        replicas[0].process.terminate()
        replicas[0].process.wait(timeout=20)
        back = teacher.context.new_page()
        open_url(back, f"{replicas[1].url}/lesson?presenter=1")
        # folded to one line once a student follows: opened for the code
        assert re.search(f"Live class {code[:4]}-{code[4:]} · [12] following",
                         panel_of(back).locator("summary").inner_text())
        open_panel(back)
        assert back.locator(".st-key-live_class_code h1").inner_text().strip().replace("-", "") == code
        assert back.get_by_text(f"You are teaching class {code[:4]}-{code[4:]} again, at its step 3").count() == 1
        assert move_and_time(back, [fresh], 4) < FOLLOW_WITHIN_S
        run_and_wait(back, back.get_by_role("button", name="End the class").click)  # ending clears the cookie
        again = teacher.context.new_page()
        open_url(again, f"{replicas[1].url}/lesson?presenter=1")
        assert again.get_by_role("button", name="Start a live class").count() == 1
        assert all(c["name"] != "lpos_teacher" for c in teacher.context.cookies())
    finally:
        for replica in replicas:
            replica.process.terminate()
            replica.process.wait(timeout=20)
